// Package rowsum checks, from the lines a training process prints, that
// every epoch of a job fed each row id exactly once over all its ranks.
//
// The process (e2e/rowcheck, or its Python twin in the tests)
// adds Hash(id) over the row ids it takes in each epoch, keeps the sums in
// its checkpoints, and prints at its end one line per epoch:
//
//	rowcheck rank=0 generation=1 epoch=0 rows=500 hash=9f2c0e2a9b3d4411
//
// Summed over the ranks of the last generation (which carry on the sums
// of the checkpoint they resumed from), an epoch that fed each of n rows
// once has n rows and the sum of Hash over 0..n-1: a row fed twice and
// another skipped would have to collide in a 64-bit hash to pass.
package rowsum
