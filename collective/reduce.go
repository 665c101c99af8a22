package collective

// The reduction kernels. add and addDiv dispatch to vectorised
// implementations for float32 and float64 where the CPU has them
// (reduce_amd64.s); the generic loops below are the fallback. Vector and
// scalar IEEE additions and divisions round identically, so which kernel
// runs never changes a result's bits.

// add sets dst[i] += src[i].
func add[T Float](dst, src []T) {
	src = src[:len(dst)]
	switch d := any(dst).(type) {
	case []float32:
		if n := addFloat32(d, any(src).([]float32)); n < len(dst) {
			addGeneric(dst[n:], src[n:])
		}
	case []float64:
		if n := addFloat64(d, any(src).([]float64)); n < len(dst) {
			addGeneric(dst[n:], src[n:])
		}
	default:
		addGeneric(dst, src)
	}
}

// addDiv sets dst[i] = (dst[i] + src[i]) / n.
func addDiv[T Float](dst, src []T, n T) {
	src = src[:len(dst)]
	switch d := any(dst).(type) {
	case []float32:
		if done := addDivFloat32(d, any(src).([]float32), float32(n)); done < len(dst) {
			addDivGeneric(dst[done:], src[done:], n)
		}
	case []float64:
		if done := addDivFloat64(d, any(src).([]float64), float64(n)); done < len(dst) {
			addDivGeneric(dst[done:], src[done:], n)
		}
	default:
		addDivGeneric(dst, src, n)
	}
}

// addGeneric is add in plain Go, unrolled so that several independent
// additions are in flight.
func addGeneric[T Float](dst, src []T) {
	src = src[:len(dst)]
	i := 0
	for ; i+8 <= len(dst); i += 8 {
		d := dst[i : i+8 : i+8]
		s := src[i : i+8 : i+8]
		d[0] += s[0]
		d[1] += s[1]
		d[2] += s[2]
		d[3] += s[3]
		d[4] += s[4]
		d[5] += s[5]
		d[6] += s[6]
		d[7] += s[7]
	}
	for ; i < len(dst); i++ {
		dst[i] += src[i]
	}
}

// addDivGeneric is addDiv in plain Go.
func addDivGeneric[T Float](dst, src []T, n T) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] = (dst[i] + src[i]) / n
	}
}
