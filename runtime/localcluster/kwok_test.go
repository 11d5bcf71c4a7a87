package localcluster

import "testing"

func TestKWOKStalled(t *testing.T) {
	const (
		start   = "\n--- 2026-11-28T02:51:31Z kueuelab: start: /bin/kwok --kubeconfig=k\n"
		watch   = `{"level":"INFO","msg":"Watch nodes","annotation":"kwok.x-k8s.io/node=fake"}` + "\n"
		serving = `{"level":"INFO","msg":"Starting HTTP server"}` + "\n"
		stage   = `{"level":"INFO","msg":"Start stage controller","resourceRef":{"apiGroup":"v1","kind":"Node"}}` + "\n"
	)
	for _, tc := range []struct {
		name, log string
		want      bool
	}{
		{"stalled after start", start + watch + serving, true},
		{"stage controllers started", start + watch + serving + stage, false},
		{"not started yet", start, false},
		{"stalled after a restart, fine before", start + watch + stage + start + watch + serving, true},
		{"fine after a restart", start + watch + serving + start + watch + stage, false},
	} {
		if got := kwokStalled(tc.log); got != tc.want {
			t.Errorf("%s: stalled %v, want %v", tc.name, got, tc.want)
		}
	}
}
