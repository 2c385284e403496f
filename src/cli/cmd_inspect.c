/* cmd_inspect: placeholder while the engine lands (replaced in this session). */
#include "cli/cli.h"
#include <stdio.h>
int brisk_cmd_inspect(int argc, char **argv) {
    (void)argc; (void)argv;
    fprintf(stderr, "brisk inspect: not built yet\n");
    return 1;
}
