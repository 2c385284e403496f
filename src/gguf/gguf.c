/* gguf: placeholder while the reader lands. */
#include "gguf/gguf.h"
