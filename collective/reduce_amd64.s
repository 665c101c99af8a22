//go:build !purego

#include "textflag.h"

// AVX2 reduction kernels: dst[i] = dst[i] + src[i], and
// dst[i] = (dst[i] + src[i]) / d. n is a multiple of one vector (8 float32
// or 4 float64); the main loop handles four vectors per iteration.

// func addF32AVX2(dst, src *float32, n int)
TEXT ·addF32AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

f32loop4:
	CMPQ CX, $32
	JLT  f32loop1
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	VADDPS  (SI), Y0, Y0
	VADDPS  32(SI), Y1, Y1
	VADDPS  64(SI), Y2, Y2
	VADDPS  96(SI), Y3, Y3
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    $128, DI
	ADDQ    $128, SI
	SUBQ    $32, CX
	JMP     f32loop4

f32loop1:
	CMPQ CX, $8
	JLT  f32done
	VMOVUPS (DI), Y0
	VADDPS  (SI), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	SUBQ    $8, CX
	JMP     f32loop1

f32done:
	VZEROUPPER
	RET

// func addF64AVX2(dst, src *float64, n int)
TEXT ·addF64AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

f64loop4:
	CMPQ CX, $16
	JLT  f64loop1
	VMOVUPD (DI), Y0
	VMOVUPD 32(DI), Y1
	VMOVUPD 64(DI), Y2
	VMOVUPD 96(DI), Y3
	VADDPD  (SI), Y0, Y0
	VADDPD  32(SI), Y1, Y1
	VADDPD  64(SI), Y2, Y2
	VADDPD  96(SI), Y3, Y3
	VMOVUPD Y0, (DI)
	VMOVUPD Y1, 32(DI)
	VMOVUPD Y2, 64(DI)
	VMOVUPD Y3, 96(DI)
	ADDQ    $128, DI
	ADDQ    $128, SI
	SUBQ    $16, CX
	JMP     f64loop4

f64loop1:
	CMPQ CX, $4
	JLT  f64done
	VMOVUPD (DI), Y0
	VADDPD  (SI), Y0, Y0
	VMOVUPD Y0, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	SUBQ    $4, CX
	JMP     f64loop1

f64done:
	VZEROUPPER
	RET

// func addDivF32AVX2(dst, src *float32, n int, d float32)
TEXT ·addDivF32AVX2(SB), NOSPLIT, $0-28
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS d+24(FP), Y4

df32loop:
	CMPQ CX, $8
	JLT  df32done
	VMOVUPS (DI), Y0
	VADDPS  (SI), Y0, Y0
	VDIVPS  Y4, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	SUBQ    $8, CX
	JMP     df32loop

df32done:
	VZEROUPPER
	RET

// func addDivF64AVX2(dst, src *float64, n int, d float64)
TEXT ·addDivF64AVX2(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSD d+24(FP), Y4

df64loop:
	CMPQ CX, $4
	JLT  df64done
	VMOVUPD (DI), Y0
	VADDPD  (SI), Y0, Y0
	VDIVPD  Y4, Y0, Y0
	VMOVUPD Y0, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	SUBQ    $4, CX
	JMP     df64loop

df64done:
	VZEROUPPER
	RET
