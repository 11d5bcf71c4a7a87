// Command hello stands in for kueuelab and the control-plane binaries in the image tests: a
// small static program that says which file it is and with what arguments it ran.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	fmt.Printf("%s %s\n", filepath.Base(os.Args[0]), strings.Join(os.Args[1:], " "))
}
