package trace

import (
	"math"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

// TestParseQuantityMatchesKubernetes cross-checks ParseQuantity against apimachinery on valid and
// invalid strings. The intended differences are listed: quantities without a digit, which
// apimachinery's scanner takes as 0 although its documented grammar requires digits, and values a
// float64 cannot hold.
func TestParseQuantityMatchesKubernetes(t *testing.T) {
	refusedOnPurpose := map[string]string{
		".": "no digits", "+": "no digits", "-": "no digits", "Gi": "no digits", "e3": "no digits", "+.": "no digits", "m": "no digits",
		"1e999": "out of range", "1e400": "out of range",
	}
	for _, s := range []string{
		"0", "1", "4", "12Gi", "4Gi", "500m", "1.5", "1.", ".5", "+.5", "+1", "-1", "-0", "00.5", "007",
		"1e3", "1E3", "1e+3", "1e-3", "1E-3", "1e03", "1.5e3", "2e0",
		"1n", "1u", "1m", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei", "1.5Gi", "0.5Mi",
		"123456789012345678901234567890", "0.000000001", "1e-12",
		// invalid
		"", " ", " 1", "1 ", "4Gii", "1K", "1ki", "1i", "1e", "1e-", "1e+", "1Ki3", "1e3Gi", "1.2.3", "0x10", "1_000", "--1", "+-1",
		"NaN", "Inf", "infinity", "abc", "1,5", "1/2", "1GiB", "1mi", "1 Gi", "1g",
		".", "+", "-", "Gi", "e3", "+.", "m", "1e999", "1e400",
	} {
		q, kerr := resource.ParseQuantity(s)
		v, err := ParseQuantity(s)
		if reason, ok := refusedOnPurpose[s]; ok {
			if err == nil || kerr != nil {
				t.Errorf("%q: want refused here (%s) and accepted by Kubernetes; got err %v, k8s err %v", s, reason, err, kerr)
			}
			continue
		}
		if (err == nil) != (kerr == nil) {
			t.Errorf("%q: ParseQuantity err %v, Kubernetes err %v", s, err, kerr)
			continue
		}
		if err != nil {
			continue
		}
		want := q.AsApproximateFloat64()
		if math.Abs(v-want) > 1e-9*math.Max(1, math.Abs(want)) {
			t.Errorf("%q: ParseQuantity = %v, Kubernetes = %v", s, v, want)
		}
	}
}
