package hostpkg

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeHost is a host whose files are a set and whose apt-get records what it ran and installs
// the files of installs when asked to install their package.
type fakeHost struct {
	files    map[string]bool
	installs map[string][]string // package -> files its installation adds
	fail     string              // the apt-get subcommand that fails
	ran      []string            // "env apt-get args..." per run
}

func (f *fakeHost) host(uid int, aptGet string) host {
	return host{
		executable: func(p string) bool { return f.files[p] },
		uid:        uid,
		aptGet:     aptGet,
		run: func(_ context.Context, out io.Writer, env []string, name string, args ...string) error {
			f.ran = append(f.ran, strings.Join(slices.Concat(env, []string{filepath.Base(name)}, args), " "))
			if args[0] == f.fail {
				return errors.New("exit status 100")
			}
			if args[0] == "install" {
				for _, pkg := range args[1:] {
					for _, p := range f.installs[pkg] {
						f.files[p] = true
					}
				}
			}
			return nil
		},
	}
}

func TestEnsure(t *testing.T) {
	needs := []Need{{Path: "/usr/bin/containerd", Package: "containerd"}, {Path: "/usr/bin/ctr", Package: "containerd"},
		{Path: "/usr/sbin/runc", Package: "runc", Alt: []string{"/usr/bin/runc"}}, {Path: "/usr/bin/unshare", Package: "util-linux"}}
	const update = "DEBIAN_FRONTEND=noninteractive apt-get update"
	const install = "DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends --no-remove containerd runc"
	installs := map[string][]string{"containerd": {"/usr/bin/containerd", "/usr/bin/ctr"}, "runc": {"/usr/sbin/runc"}}
	tests := []struct {
		name     string
		uid      int
		aptGet   string
		installs map[string][]string
		fail     string
		files    []string // present besides /usr/bin/unshare
		wantRuns []string
		// wantMissing are the files a *MissingError names, wantErr a part of any other error.
		wantMissing []string
		wantErr     string
	}{
		{name: "installs as root", aptGet: "/usr/bin/apt-get", installs: installs, wantRuns: []string{update, install}},
		{name: "not root", uid: 1000, aptGet: "/usr/bin/apt-get", wantMissing: []string{"/usr/bin/containerd", "/usr/bin/ctr", "/usr/sbin/runc"}},
		{name: "no apt-get", wantMissing: []string{"/usr/bin/containerd", "/usr/bin/ctr", "/usr/sbin/runc"}},
		{name: "update fails", aptGet: "/usr/bin/apt-get", fail: "update", wantRuns: []string{update}, wantErr: "apt-get update: exit status 100"},
		{name: "install fails", aptGet: "/usr/bin/apt-get", fail: "install", wantRuns: []string{update, install},
			wantErr: "apt-get install containerd runc: exit status 100"},
		// Docker's containerd.io ships runc at /usr/bin/runc: Debian's runc package (which would
		// conflict with it) is not asked for.
		{name: "runc elsewhere", uid: 1000, files: []string{"/usr/bin/containerd", "/usr/bin/ctr", "/usr/bin/runc"}},
		{name: "a file still missing", aptGet: "/usr/bin/apt-get", installs: map[string][]string{"containerd": {"/usr/bin/containerd", "/usr/bin/ctr"}},
			wantRuns: []string{update, install}, wantMissing: []string{"/usr/sbin/runc"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeHost{files: map[string]bool{"/usr/bin/unshare": true}, installs: tc.installs, fail: tc.fail}
			for _, p := range tc.files {
				f.files[p] = true
			}
			err := f.host(tc.uid, tc.aptGet).ensure(context.Background(), needs, io.Discard)
			if !slices.Equal(f.ran, tc.wantRuns) {
				t.Errorf("ran %q, want %q", f.ran, tc.wantRuns)
			}
			var m *MissingError
			switch {
			case tc.wantMissing != nil:
				if !errors.As(err, &m) {
					t.Fatalf("err = %v, want a *MissingError", err)
				}
				var got []string
				for _, n := range m.Missing {
					got = append(got, n.Path)
					if !strings.Contains(err.Error(), n.Path) {
						t.Errorf("error %q does not name %s", err, n.Path)
					}
				}
				if !slices.Equal(got, tc.wantMissing) {
					t.Errorf("missing %v, want %v", got, tc.wantMissing)
				}
				if want := "apt-get update && apt-get install -y --no-install-recommends"; !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not give the command (%s ...)", err, want)
				}
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || errors.As(err, &m) {
					t.Errorf("err = %v, want one saying %q", err, tc.wantErr)
				}
			case err != nil:
				t.Errorf("err = %v", err)
			}
		})
	}
}

func TestEnsureNothingMissing(t *testing.T) {
	f := &fakeHost{files: map[string]bool{"/usr/sbin/runc": true}}
	// Not root and no apt-get: with nothing missing, neither matters.
	if err := f.host(1000, "").ensure(context.Background(), []Need{{Path: "/usr/sbin/runc", Package: "runc"}}, nil); err != nil || f.ran != nil {
		t.Errorf("err = %v, ran %q; want nil and nothing", err, f.ran)
	}
}

func TestInstallCommand(t *testing.T) {
	got := InstallCommand([]Need{{Path: "/a", Package: "runc"}, {Path: "/b", Package: "containerd"}, {Path: "/c", Package: "runc"}})
	if want := "apt-get update && apt-get install -y --no-install-recommends --no-remove containerd runc"; got != want {
		t.Errorf("InstallCommand = %q, want %q", got, want)
	}
}

// TestRealNodePathsAreDebians checks RealNode against the packages installed here: each file of
// an installed package must be where RealNode looks for it. Packages this host lacks say nothing,
// so on a host without them the test checks only the list's shape.
func TestRealNodePathsAreDebians(t *testing.T) {
	for _, p := range []string{Containerd, Ctr, Shim, Runc, CNIBinDir + "/bridge"} {
		if !slices.ContainsFunc(RealNode, func(n Need) bool { return n.Path == p }) {
			t.Errorf("RealNode does not need %s", p)
		}
	}
	dpkg, err := exec.LookPath("dpkg-query")
	for _, n := range RealNode {
		if !filepath.IsAbs(n.Path) || n.Package == "" {
			t.Errorf("need %+v: want an absolute path and a package", n)
		}
		if err != nil {
			continue
		}
		status, _ := exec.Command(dpkg, "-W", "-f=${Status}", n.Package).Output()
		if string(status) != "install ok installed" {
			continue
		}
		if !executable(n.Path) {
			t.Errorf("%s is installed but %s is not an executable", n.Package, n.Path)
		}
	}
	if err != nil {
		t.Logf("no dpkg-query here (%v): the paths were not checked against installed packages", err)
	}
}
