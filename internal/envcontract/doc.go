// Package envcontract is the one definition of the training-process
// environment: the names of the variables an executor sets for the
// processes it starts (SPINDLE_RANK, MASTER_ADDR, TF_CONFIG, ...), the
// defaults their readers assume when one is unset, and what each means.
//
// The executor that writes them, the task and collective packages that
// read them in Go trainers, the spindle Python package (its _contract.py
// is generated from this package) and the README's table all take the
// names from here; a test fails when any of them drifts.
package envcontract
