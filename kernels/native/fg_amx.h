/* What the kernels on the AMX tile unit share (cpu_greedy.c's screen, cpu_quant.c's int8 linears
 * in quant_amx.h): the process's grant of the tile state, asked of Linux once, and the tile
 * configuration. Included only where the CPU has the tile unit and the OS is Linux (the includer
 * checks __AMX_TILE__ and __linux__). Each library keeps its own answer to the grant.
 */

#ifndef FG_AMX_H
#define FG_AMX_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

/* 1 once the kernel has granted this process the tile state (Linux 5.16+), 0 if it will not:
 * asked once (two threads asking at once both get the same answer) */
static int fg_amx_granted(void)
{
    static int state; /* 0 not asked, 1 granted, -1 refused */
    int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (!s) {
        s = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0 ? 1 : -1;
        __atomic_store_n(&state, s, __ATOMIC_RELEASE);
    }
    return s > 0;
}

/* This thread's tiles: tmm0 .. tmm(split-1) of `rows` rows, the rest of `b_rows`, every row 64
 * bytes (palette 1). Loading a configuration zeroes the tiles. */
static void fg_amx_configure(int rows, int split, int b_rows)
{
    struct {
        uint8_t palette, start_row, reserved[14];
        uint16_t colsb[16];
        uint8_t rows[16];
    } cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) {
        cfg.rows[t] = (uint8_t)(t < split ? rows : b_rows);
        cfg.colsb[t] = 64;
    }
    _tile_loadconfig(&cfg);
}

#endif
