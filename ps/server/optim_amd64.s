//go:build !purego

#include "textflag.h"

// func adaGradAVX2(w, acc, grad *float32, n int, lr, eps float32)
//
// For n a multiple of 8, with the scalar update's operations in its
// order, each rounded to float32 as the scalar code rounds it:
//   acc[i] = acc[i] + grad[i]*grad[i]
//   w[i]   = w[i] - (lr*grad[i]) / (sqrt(acc[i]) + eps)
TEXT ·adaGradAVX2(SB), NOSPLIT, $0-40
	MOVQ         w+0(FP), DI
	MOVQ         acc+8(FP), SI
	MOVQ         grad+16(FP), DX
	MOVQ         n+24(FP), CX
	VBROADCASTSS lr+32(FP), Y6
	VBROADCASTSS eps+36(FP), Y7

loop:
	CMPQ    CX, $8
	JLT     done
	VMOVUPS (DX), Y0
	VMOVUPS (SI), Y1
	VMULPS  Y0, Y0, Y2
	VADDPS  Y2, Y1, Y1
	VMOVUPS Y1, (SI)
	VSQRTPS Y1, Y3
	VADDPS  Y7, Y3, Y3
	VMULPS  Y0, Y6, Y4
	VDIVPS  Y3, Y4, Y4
	VMOVUPS (DI), Y5
	VSUBPS  Y4, Y5, Y5
	VMOVUPS Y5, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	ADDQ    $32, DX
	SUBQ    $8, CX
	JMP     loop

done:
	VZEROUPPER
	RET
