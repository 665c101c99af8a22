// Package gpu finds the GPUs of this machine, so that a request for more
// GPUs than there are is refused before anything runs rather than handing
// training processes devices that do not exist.
package gpu
