// Package kueuever names the Kueue releases kueuelab replays and what each brings that a replay's
// inputs can ask for. It imports no Kueue: the binary that links a given release is chosen from
// here (runtime/simver builds one per release for the sim engine; runtime/tools builds the
// cluster engine's Kueue).
package kueuever

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

// Version is one Kueue release kueuelab replays.
type Version struct {
	// Name is the release, "v0.19.2".
	Name string
	// Tag is the Go build tag that selects the release's compat files in the packages that call
	// Kueue's code (runtime/sim/kueuelib, runtime/kueuewl); empty for Default.
	Tag string
	// Kubernetes is the minor version of the Kubernetes libraries the release's go.mod requires.
	// A sim built for an older release links kueuelab's (newer) libraries: Kueue's scheduling
	// code is the release's, the client libraries around it are not.
	Kubernetes string
	// SimPatches are the patches (runtime/tools/patches) its source needs to build against
	// kueuelab's client libraries: API adaptations, none in queueing or scheduling.
	SimPatches []string
	// Cluster says whether the cluster engine can run the release (its patched binary and
	// manifests are in runtime/tools).
	Cluster bool
}

// Default is the release kueuelab links and runs unless told otherwise.
const Default = "v0.19.2"

// Supported lists the releases, oldest first. The module proxy here serves no v0.16.x.
var Supported = []Version{
	{Name: "v0.15.0", Tag: "kueue_v0_15", Kubernetes: "1.34", SimPatches: []string{"kueue-v0.15.0-sim-client-libs.patch"}},
	{Name: "v0.17.1", Tag: "kueue_v0_17", Kubernetes: "1.35"},
	{Name: "v0.18.3", Tag: "kueue_v0_18", Kubernetes: "1.36"},
	{Name: Default, Kubernetes: "1.36", Cluster: true},
}

// Names are the supported releases' names, for messages.
func Names() string {
	var n []string
	for _, v := range Supported {
		n = append(n, v.Name)
	}
	return strings.Join(n, ", ")
}

// Lookup finds a supported release by its name ("v0.18.3", "0.18.3") or its minor ("v0.18": the
// one release of that minor kueuelab supports). "" is Default.
func Lookup(s string) (Version, error) {
	if s == "" {
		s = Default
	}
	want, err := version.ParseGeneric(s)
	if err != nil {
		return Version{}, fmt.Errorf("kueue version %q: not a version (supported: %s)", s, Names())
	}
	// ParseGeneric fills a missing patch with 0: "v0.18" and "v0.18.0" parse alike, so the
	// components given decide whether a minor is meant.
	minorOnly := strings.Count(strings.TrimPrefix(s, "v"), ".") == 1
	for _, v := range Supported {
		have := version.MustParseGeneric(v.Name)
		if have.EqualTo(want) || (minorOnly && have.Major() == want.Major() && have.Minor() == want.Minor()) {
			return v, nil
		}
	}
	return Version{}, fmt.Errorf("kueue version %q is not supported (supported: %s)", s, Names())
}

// ForCluster is the supported release that replays a cluster running Kueue running: the one of
// its minor (patch releases change no queueing a replay sees). "" (unknown) is Default.
func ForCluster(running string) (Version, error) {
	if running == "" {
		return MustLookup(Default), nil
	}
	have, err := version.ParseGeneric(running)
	if err != nil {
		return Version{}, fmt.Errorf("kueue version %q: not a version (supported: %s)", running, Names())
	}
	for _, v := range Supported {
		if s := version.MustParseGeneric(v.Name); s.Major() == have.Major() && s.Minor() == have.Minor() {
			return v, nil
		}
	}
	return Version{}, fmt.Errorf("the cluster runs Kueue %s: kueuelab replays no release of its minor (supported: %s)", running, Names())
}

// MustLookup is Lookup for a name known to be supported.
func MustLookup(s string) Version {
	v, err := Lookup(s)
	if err != nil {
		panic(err)
	}
	return v
}

// DefaultsWaitForPodsReady says whether the release turns waitForPodsReady on when its
// Configuration has no such section (from v0.19).
func (v Version) DefaultsWaitForPodsReady() bool { return v.Has("v0.19.0") }

// Since names a setting or behaviour and the release that introduced it.
type Since struct {
	What    string
	Version string
}

// Has reports whether release v has what came in since.
func (v Version) Has(since string) bool {
	return version.MustParseGeneric(v.Name).AtLeast(version.MustParseGeneric(since))
}

// Require returns an error naming the release that introduced what, when v is older.
func (v Version) Require(what, since string) error {
	if v.Has(since) {
		return nil
	}
	return fmt.Errorf("%s needs Kueue %s or later (this replay runs Kueue %s)", what, since, v.Name)
}

// renamedGates are Kueue feature gates v0.18 renamed (the old names deprecated in v0.18, removed
// in v0.19).
var renamedGates = map[string]string{
	"DynamicResourceAllocation": "KueueDRAIntegration",
	"DRAExtendedResources":      "KueueDRAIntegrationExtendedResource",
}

// GateHint says what an unknown gate name is called in other releases, or "".
func GateHint(name string) string {
	if to, ok := renamedGates[name]; ok {
		return fmt.Sprintf("%s was renamed %s in v0.18.0; the old name is gone from v0.19.0", name, to)
	}
	for from, to := range renamedGates {
		if to == name {
			return fmt.Sprintf("%s is %s before v0.18.0", name, from)
		}
	}
	return ""
}
