//go:build !purego

#include "textflag.h"

// func transpose8(dst *float32, stride uintptr, cols *[8]*float32, blocks int)
//
// Each block loads eight rows of the eight columns (one YMM register per
// column), transposes them in three steps (unpack pairs of columns,
// shuffle pairs of pairs, swap 128-bit halves) and stores one register
// per row, stride bytes apart.
TEXT ·transpose8(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ stride+8(FP), DX
	MOVQ cols+16(FP), AX
	MOVQ blocks+24(FP), CX
	MOVQ 0(AX), BX
	MOVQ 8(AX), SI
	MOVQ 16(AX), R8
	MOVQ 24(AX), R9
	MOVQ 32(AX), R10
	MOVQ 40(AX), R11
	MOVQ 48(AX), R12
	MOVQ 56(AX), R13
	XORQ AX, AX
	TESTQ CX, CX
	JZ done

loop:
	// Column c's rows 0-7 in Yc.
	VMOVUPS (BX)(AX*1), Y0
	VMOVUPS (SI)(AX*1), Y1
	VMOVUPS (R8)(AX*1), Y2
	VMOVUPS (R9)(AX*1), Y3
	VMOVUPS (R10)(AX*1), Y4
	VMOVUPS (R11)(AX*1), Y5
	VMOVUPS (R12)(AX*1), Y6
	VMOVUPS (R13)(AX*1), Y7

	// Pairs of columns: Y8 = a0 b0 a1 b1 | a4 b4 a5 b5, Y9 = a2 b2 a3 b3 | a6 b6 a7 b7, ...
	VUNPCKLPS Y1, Y0, Y8
	VUNPCKHPS Y1, Y0, Y9
	VUNPCKLPS Y3, Y2, Y10
	VUNPCKHPS Y3, Y2, Y11
	VUNPCKLPS Y5, Y4, Y12
	VUNPCKHPS Y5, Y4, Y13
	VUNPCKLPS Y7, Y6, Y14
	VUNPCKHPS Y7, Y6, Y15

	// Four columns: Y0 = a0 b0 c0 d0 | a4 b4 c4 d4, Y1 = rows 1 and 5, ...
	VSHUFPS $0x44, Y10, Y8, Y0
	VSHUFPS $0xEE, Y10, Y8, Y1
	VSHUFPS $0x44, Y11, Y9, Y2
	VSHUFPS $0xEE, Y11, Y9, Y3
	VSHUFPS $0x44, Y14, Y12, Y4
	VSHUFPS $0xEE, Y14, Y12, Y5
	VSHUFPS $0x44, Y15, Y13, Y6
	VSHUFPS $0xEE, Y15, Y13, Y7

	// Whole rows: low halves give rows 0-3, high halves rows 4-7.
	VPERM2F128 $0x20, Y4, Y0, Y8
	VPERM2F128 $0x20, Y5, Y1, Y9
	VPERM2F128 $0x20, Y6, Y2, Y10
	VPERM2F128 $0x20, Y7, Y3, Y11
	VPERM2F128 $0x31, Y4, Y0, Y12
	VPERM2F128 $0x31, Y5, Y1, Y13
	VPERM2F128 $0x31, Y6, Y2, Y14
	VPERM2F128 $0x31, Y7, Y3, Y15

	VMOVUPS Y8, (DI)
	ADDQ    DX, DI
	VMOVUPS Y9, (DI)
	ADDQ    DX, DI
	VMOVUPS Y10, (DI)
	ADDQ    DX, DI
	VMOVUPS Y11, (DI)
	ADDQ    DX, DI
	VMOVUPS Y12, (DI)
	ADDQ    DX, DI
	VMOVUPS Y13, (DI)
	ADDQ    DX, DI
	VMOVUPS Y14, (DI)
	ADDQ    DX, DI
	VMOVUPS Y15, (DI)
	ADDQ    DX, DI

	ADDQ $32, AX
	DECQ CX
	JNZ  loop

done:
	VZEROUPPER
	RET
