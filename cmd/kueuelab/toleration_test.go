package main

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestTolerationsFlag(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    corev1.Toleration
		wantErr bool
	}{
		{in: "kueuelab.io/real-node:NoSchedule", want: corev1.Toleration{Key: "kueuelab.io/real-node", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		{in: "dedicated=runner:NoExecute", want: corev1.Toleration{Key: "dedicated", Value: "runner", Operator: corev1.TolerationOpEqual, Effect: corev1.TaintEffectNoExecute}},
		{in: "dedicated", wantErr: true},
		{in: "dedicated:Never", wantErr: true},
		{in: ":NoSchedule", wantErr: true},
	} {
		var ts []corev1.Toleration
		err := tolerationsFlag{&ts}.Set(tc.in)
		if (err != nil) != tc.wantErr {
			t.Fatalf("%q: err %v, want error %v", tc.in, err, tc.wantErr)
		}
		if err != nil {
			continue
		}
		if len(ts) != 1 || !reflect.DeepEqual(ts[0], tc.want) {
			t.Errorf("%q: %+v, want %+v", tc.in, ts, tc.want)
		}
		if got := (tolerationsFlag{&ts}).String(); got != tc.in {
			t.Errorf("%q: String() = %q", tc.in, got)
		}
	}
}
