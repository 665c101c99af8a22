// Package internal is the ground floor of Spindle's packages: what every
// room above may use, and which uses nothing above it. Its packages import
// the standard library, third-party modules and each other, never a
// package outside internal/ (TestInternalStaysOnTheGround keeps it so).
//
// What stands here: the Hadoop protocol stack (hadoop/hadooprpc,
// hadoop/hadooppb, hadoop/kerberos), the feed's DEFLATE decoder
// (inflate), job secrets and certificates (auth,
// peercred, tlsgen), configuration (config, textdist), the
// executor-to-process environment contract (envcontract), small helpers
// of the executor (gpu, outlines), the command line's client of a session's
// warm ranks (warm) and aids that tests share (testaddr,
// syncbuf, sysfstest, rowsum).
package internal
