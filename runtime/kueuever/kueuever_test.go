package kueuever

import (
	"strings"
	"testing"
)

func TestLookup(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "", want: Default},
		{in: "v0.19.2", want: "v0.19.2"},
		{in: "0.18.3", want: "v0.18.3"},
		{in: "v0.17", want: "v0.17.1"},
		{in: "v0.15", want: "v0.15.0"},
		{in: "v0.15.0", want: "v0.15.0"},
		{in: "v0.18.0", err: `"v0.18.0" is not supported (supported: v0.15.0, v0.17.1, v0.18.3, v0.19.2)`},
		{in: "v0.16", err: "is not supported"},
		{in: "latest", err: "not a version"},
	} {
		v, err := Lookup(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Lookup(%q) = %v, %v; want error %q", tc.in, v.Name, err, tc.err)
			}
			continue
		}
		if err != nil || v.Name != tc.want {
			t.Errorf("Lookup(%q) = %q, %v; want %q", tc.in, v.Name, err, tc.want)
		}
	}
}

func TestRequire(t *testing.T) {
	v17, _ := Lookup("v0.17.1")
	if err := v17.Require("quotaCheckStrategy", "v0.18.0"); err == nil || !strings.Contains(err.Error(), "needs Kueue v0.18.0 or later (this replay runs Kueue v0.17.1)") {
		t.Errorf("Require = %v", err)
	}
	if err := v17.Require("the priority-boost annotation", "v0.17.0"); err != nil {
		t.Errorf("Require = %v", err)
	}
}

func TestOneTagPerRelease(t *testing.T) {
	tags := map[string]bool{}
	defaults := 0
	for _, v := range Supported {
		if v.Tag == "" {
			defaults++
			if v.Name != Default {
				t.Errorf("%s has no build tag but is not the default", v.Name)
			}
		}
		if tags[v.Tag] {
			t.Errorf("tag %q twice", v.Tag)
		}
		tags[v.Tag] = true
	}
	if defaults != 1 {
		t.Errorf("%d releases without a tag, want 1 (the default)", defaults)
	}
}

func TestForCluster(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{in: "", want: Default},
		{in: "v0.18.2", want: "v0.18.3"},
		{in: "v0.19.0", want: "v0.19.2"},
		{in: "v0.15.1", want: "v0.15.0"},
		{in: "v0.16.4", err: "the cluster runs Kueue v0.16.4: kueuelab replays no release of its minor (supported: v0.15.0, v0.17.1, v0.18.3, v0.19.2)"},
		{in: "main", err: "not a version"},
	} {
		v, err := ForCluster(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ForCluster(%q) = %v, %v; want error %q", tc.in, v.Name, err, tc.err)
			}
			continue
		}
		if err != nil || v.Name != tc.want {
			t.Errorf("ForCluster(%q) = %q, %v; want %q", tc.in, v.Name, err, tc.want)
		}
	}
}
