/* gemm-micro: throughput of the packed GEMM kernels, one thread, weights in L2.
 * 64 groups of 16 rows x 2048 columns against T activation rows; best of 20.
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Isrc -Iinclude bench/gemm-micro.c build-perf/libbrisk_core.a \
 *       -lm -lpthread $(pkg-config --libs libpcre2-8 jansson) -o /tmp/gemm-micro
 *   /tmp/gemm-micro T [0 = Q4_0 | 1 = Q8_0]                                       */
#include "kernels/kernels.h"
#include "quant/quant.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  int T=atoi(argv[1]); int wt=atoi(argv[2])?BRISK_Q_Q8_0:BRISK_Q_Q4_0;
  const brisk_gemm_kernels*g=brisk_gemm_best(); const brisk_kernels*k=brisk_kernels_best();
  if(!g||argc<3){fprintf(stderr,"usage: gemm-micro T 0|1 (needs AVX-512 VNNI)\n");return 1;}
  int64_t n=2048, G=64; size_t rb,ab; brisk_qtype_row_bytes(wt,n,&rb); brisk_qtype_row_bytes(BRISK_Q_Q8_0,n,&ab);
  uint8_t*w=calloc(G*16,rb); uint8_t*a=calloc(T,ab); float*x=malloc(n*4); int64_t sl=brisk_act_sums_len(n); int32_t*s=calloc(T*sl,4); float*o=calloc(T*16*G,4);
  for(int i=0;i<(int)(G*16*rb);i++) w[i]=rand(); for(int i=0;i<n;i++) x[i]=rand()/(float)RAND_MAX-0.5f;
  for(int t=0;t<T;t++){k->quantize_act[BRISK_Q_Q8_0](x,a+t*ab,n); g->act_sums[BRISK_Q_Q8_0](a+t*ab,n,s+t*sl);}
  double best=1e9; for(int rep=0;rep<20;rep++){double t0=now(); for(int gi=0;gi<G;gi++) g->gemm[wt](n,w+gi*16*rb,a,ab,s,sl,T,o+gi*16,16*G); double dt=now()-t0; if(dt<best)best=dt;}
  double mac=(double)G*16*n*T; printf("T=%d %s: %.1f GMAC/s  (weights %.1f GB/s)\n",T,wt==BRISK_Q_Q8_0?"q8_0":"q4_0",mac/best*1e-9,(double)G*16*rb/best*1e-9);
}
