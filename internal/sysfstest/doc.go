// Package sysfstest unpacks fake sysfs trees for tests: txtar archives
// (rdma/testdata) laid out as Linux lays out /sys, in which entries named
// "path -> target" are symlinks.
package sysfstest
