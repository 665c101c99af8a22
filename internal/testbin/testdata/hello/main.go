// Command hello is the program testbin's tests build.
package main

import "fmt"

func main() { fmt.Println("hello from a test binary") }
