package main

import (
	"bytes"
	"strings"
	"testing"
)

// stream is `go test -json` output (trimmed of times) of four packages: a passes with a skipped
// test and a skipped subtest, b fails, c does not build, d has no tests; e never ends.
const stream = `{"Action":"start","Package":"x/a"}
{"Action":"run","Package":"x/a","Test":"TestSkip"}
{"Action":"output","Package":"x/a","Test":"TestSkip","Output":"=== RUN   TestSkip\n"}
{"Action":"output","Package":"x/a","Test":"TestSkip","Output":"    a_test.go:3: no thing here\n"}
{"Action":"output","Package":"x/a","Test":"TestSkip","Output":"--- SKIP: TestSkip (0.00s)\n"}
{"Action":"skip","Package":"x/a","Test":"TestSkip","Elapsed":0}
{"Action":"start","Package":"x/b"}
{"Action":"run","Package":"x/b","Test":"TestFail"}
{"Action":"output","Package":"x/b","Test":"TestFail","Output":"=== RUN   TestFail\n"}
{"Action":"output","Package":"x/b","Test":"TestFail","Output":"    b_test.go:3: boom\n"}
{"Action":"output","Package":"x/b","Test":"TestFail","Output":"--- FAIL: TestFail (0.00s)\n"}
{"Action":"fail","Package":"x/b","Test":"TestFail","Elapsed":0}
{"Action":"run","Package":"x/a","Test":"TestSub"}
{"Action":"output","Package":"x/a","Test":"TestSub","Output":"=== RUN   TestSub\n"}
{"Action":"run","Package":"x/a","Test":"TestSub/s"}
{"Action":"output","Package":"x/a","Test":"TestSub/s","Output":"=== RUN   TestSub/s\n"}
{"Action":"output","Package":"x/a","Test":"TestSub/s","Output":"    a_test.go:4: sub reason\n"}
{"Action":"output","Package":"x/a","Test":"TestSub/s","Output":"        line2\n"}
{"Action":"output","Package":"x/a","Test":"TestSub/s","Output":"--- SKIP: TestSub/s (0.00s)\n"}
{"Action":"skip","Package":"x/a","Test":"TestSub/s","Elapsed":0}
{"Action":"output","Package":"x/a","Test":"TestSub","Output":"--- PASS: TestSub (0.00s)\n"}
{"Action":"pass","Package":"x/a","Test":"TestSub","Elapsed":0}
{"Action":"run","Package":"x/a","Test":"TestPass"}
{"Action":"output","Package":"x/a","Test":"TestPass","Output":"    a_test.go:5: noise\n"}
{"Action":"output","Package":"x/a","Test":"TestPass","Output":"--- PASS: TestPass (0.00s)\n"}
{"Action":"pass","Package":"x/a","Test":"TestPass","Elapsed":0}
{"Action":"output","Package":"x/a","Output":"PASS\n"}
{"Action":"output","Package":"x/a","Output":"ok  \tx/a\t0.035s\n"}
{"Action":"pass","Package":"x/a","Elapsed":0.051}
{"Action":"output","Package":"x/b","Output":"FAIL\n"}
{"Action":"output","Package":"x/b","Output":"FAIL\tx/b\t0.034s\n"}
{"Action":"fail","Package":"x/b","Elapsed":0.034}
{"ImportPath":"x/c [x/c.test]","Action":"build-output","Output":"# x/c [x/c.test]\n"}
{"ImportPath":"x/c [x/c.test]","Action":"build-output","Output":"c/c_test.go:3:27: undefined: undefined\n"}
{"ImportPath":"x/c [x/c.test]","Action":"build-fail"}
{"Action":"start","Package":"x/c"}
{"Action":"output","Package":"x/c","Output":"FAIL\tx/c [build failed]\n"}
{"Action":"fail","Package":"x/c","Elapsed":0,"FailedBuild":"x/c [x/c.test]"}
{"Action":"start","Package":"x/d"}
{"Action":"output","Package":"x/d","Output":"?   \tx/d\t[no test files]\n"}
{"Action":"skip","Package":"x/d","Elapsed":0}
go: warning: not a test event
{"Action":"start","Package":"x/e"}
{"Action":"run","Package":"x/e","Test":"TestHang"}
{"Action":"output","Package":"x/e","Test":"TestHang","Output":"=== RUN   TestHang\n"}
{"Action":"output","Package":"x/e","Test":"TestHang","Output":"    e_test.go:9: waiting\n"}
`

const want = `--- SKIP: TestSkip (0.00s)
    a_test.go:3: no thing here
--- SKIP: TestSub/s (0.00s)
    a_test.go:4: sub reason
        line2
ok  	x/a	0.035s
--- FAIL: TestFail (0.00s)
    b_test.go:3: boom
FAIL
FAIL	x/b	0.034s
# x/c [x/c.test]
c/c_test.go:3:27: undefined: undefined
FAIL	x/c [build failed]
?   	x/d	[no test files]
go: warning: not a test event
    e_test.go:9: waiting
FAIL
`

// TestFilter: skips and failures with their reasons, go test's package lines, nothing of the
// tests that passed, and the stream's end as go test prints it.
func TestFilter(t *testing.T) {
	var out bytes.Buffer
	if err := filter(strings.NewReader(stream), &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}
