package wire

// interleaveBlock is the rows interleave converts at a time: a block's
// lines of every column stay in the first-level cache while its rows are
// written.
const interleaveBlock = 256

// interleave writes rows [from, to) of the columns src row-major into
// dst: row r's values are dst[r*len(src) : (r+1)*len(src)]. Writes are
// sequential and each column is read sequentially, which the cache and
// the prefetcher handle far better than strided writes. Where the CPU
// has a vector kernel (interleaveWide), it takes the columns eight at a
// time; the loops below take the rest.
func interleave(dst []float32, src [][]float32, from, to int) {
	nf := len(src)
	if nf == 1 {
		copy(dst[from:to], src[0][from:to])
		return
	}
	for r0 := from; r0 < to; r0 += interleaveBlock {
		r1 := min(to, r0+interleaveBlock)
		j := interleaveWide(dst, src, r0, r1)
		interleaveColumns(dst, src, j, r0, r1)
	}
}

// interleaveColumns is interleave of rows [r0, r1) for the columns from
// j0 on. Four columns at a time write 16 contiguous bytes of each row.
func interleaveColumns(dst []float32, src [][]float32, j0, r0, r1 int) {
	nf, n := len(src), r1-r0
	j := j0
	for ; j+4 <= nf; j += 4 {
		c0, c1, c2, c3 := src[j][r0:r1], src[j+1][r0:r1], src[j+2][r0:r1], src[j+3][r0:r1]
		c1, c2, c3 = c1[:n], c2[:n], c3[:n]
		k := r0*nf + j
		for i, v := range c0[:n] {
			d := dst[k : k+4 : k+4]
			d[0], d[1], d[2], d[3] = v, c1[i], c2[i], c3[i]
			k += nf
		}
	}
	for ; j < nf; j++ {
		k := r0*nf + j
		for _, v := range src[j][r0:r1] {
			dst[k] = v
			k += nf
		}
	}
}
