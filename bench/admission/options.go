package admission

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Options configure Run. The zero value runs the full study from inside the
// repository: levels 10, 50 and 200, 3,000 pods per configuration and level
// in three rounds, 1,000 nodes, all five configurations, the twelve-shape
// pod mix, gpuadmit built from the repository.
type Options struct {
	// Levels are the numbers of concurrent clients; nil means 10, 50, 200.
	Levels []int
	// Pods is how many pods each configuration creates at each level, over
	// all rounds; zero means 3000.
	Pods int
	// Rounds splits those pods into rounds; within a round every
	// configuration runs once, in an order that rotates from round to round
	// and level to level, so background load falls on all alike. Zero means 3.
	Rounds int
	// Nodes is the number of fake GPU nodes; zero means 1000.
	Nodes int
	// Configs are the configurations to compare (none, noop, patch, replay,
	// gpuadmit, opa); nil means Configurations (all but replay).
	Configs []string
	// Mix is how the pods differ (MixShapes, MixTemplate, MixDistinct, MixLabeled);
	// empty means MixShapes.
	Mix Mix
	// Root is the repository root (deploy/base is installed from it); empty
	// means the directory holding go.mod, searched upwards from the working directory.
	Root string
	// BinDir holds the control-plane binaries hack/e2e-binaries.sh builds;
	// empty means $GPUADMIT_E2E_BIN, else <Root>/test/e2e/.bin/v1.37.0.
	BinDir string
	// OPA is the opa binary; empty means $GPUADMIT_TOOLS/opa, else
	// <Root>/.bin/tools/opa (hack/tools.sh installs it there), else opa on $PATH.
	OPA string
	// WebhookBinary is a built cmd/webhook, which runs gpuadmit as its own
	// process; empty means Run builds <Root>/cmd/webhook into the log
	// directory as "gpuadmit" (so /proc names the process so).
	WebhookBinary string
	// WebhookPprof, when set, is where gpuadmit's process serves Go's
	// /debug/pprof, to profile it during a run (go tool pprof
	// http://ADDR/debug/pprof/profile?seconds=20); empty serves none.
	WebhookPprof string
	// LogDir keeps the components' logs; empty means a temporary directory,
	// removed when the run succeeds.
	LogDir string
	// PodEvents runs gpuadmit with a GPUAdmitted Event per admitted pod (the
	// webhook's --pod-events); false runs it as deployed by default, with
	// Events for denials, warnings and fallbacks only.
	PodEvents bool
	// ProfileDir, when set, receives a CPU profile of this process (the
	// clients; the webhooks are processes of their own) for every measured round,
	// cpu-<config>-<level>-r<round>.pprof; empty profiles nothing.
	ProfileDir string
	// APIServerProfile, when positive (and ProfileDir set), also takes a
	// CPU profile of kube-apiserver (its /debug/pprof/profile) over the
	// first that many seconds of every measured round,
	// apiserver-<config>-<level>-r<round>.pprof: what the API server spends
	// on each configuration's pods; with WebhookPprof, gpuadmit's process
	// too (gpuadmit-<config>-…). Rounds should last longer.
	APIServerProfile int
	// Progress receives a line per step and run; nil means none.
	Progress io.Writer
}

func (o *Options) defaults() error {
	if len(o.Levels) == 0 {
		o.Levels = []int{10, 50, 200}
	}
	if o.Pods <= 0 {
		o.Pods = 3000
	}
	if o.Rounds <= 0 {
		o.Rounds = 3
	}
	o.Rounds = min(o.Rounds, o.Pods)
	if o.Nodes <= 0 {
		o.Nodes = 1000
	}
	if len(o.Configs) == 0 {
		o.Configs = slices.Clone(Configurations)
	}
	for _, c := range o.Configs {
		if !slices.Contains(AllConfigurations, c) {
			return fmt.Errorf("configuration %q: want one of %s", c, strings.Join(AllConfigurations, ", "))
		}
	}
	if o.Mix == "" {
		o.Mix = MixShapes
	}
	if slices.Contains(o.Configs, Replay) && o.Mix != MixTemplate {
		return fmt.Errorf("configuration replay answers every pod with gpuadmit's patch for the first: it needs --mix template, not %s", o.Mix)
	}
	if !slices.Contains(Mixes, o.Mix) {
		return fmt.Errorf("pod mix %q: want one of %s, %s, %s, %s", o.Mix, MixShapes, MixTemplate, MixDistinct, MixLabeled)
	}
	for _, l := range o.Levels {
		if l <= 0 {
			return fmt.Errorf("level %d: want a positive number of clients", l)
		}
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if err := ControlPlaneDirs(&o.Root, &o.BinDir); err != nil {
		return err
	}
	if o.OPA == "" && slices.Contains(o.Configs, OPA) {
		o.OPA = FindOPA(o.Root)
		if o.OPA == "" {
			return errors.New("opa binary not found in $GPUADMIT_TOOLS, .bin/tools or $PATH (run hack/tools.sh)")
		}
	}
	return nil
}

// FindOPA returns the opa binary hack/tools.sh installs, or opa on $PATH, or "".
func FindOPA(root string) string {
	dir := os.Getenv("GPUADMIT_TOOLS")
	if dir == "" {
		dir = filepath.Join(root, ".bin/tools")
	}
	if p := filepath.Join(dir, "opa"); isExecutable(p) {
		return p
	}
	if p, err := exec.LookPath("opa"); err == nil {
		return p
	}
	return ""
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// moduleRoot finds gpuadmit's go.mod upwards from the working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(b), "module github.com/gpuadmit/gpuadmit\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside gpuadmit's repository; set the repository root")
		}
		dir = parent
	}
}

// ControlPlaneDirs fills in an empty repository root (the directory holding
// go.mod, searched upwards) and an empty directory of control-plane binaries
// ($GPUADMIT_E2E_BIN, else <root>/test/e2e/.bin/v1.37.0), and checks that
// the binaries are there.
func ControlPlaneDirs(root, binDir *string) error {
	if *root == "" {
		r, err := moduleRoot()
		if err != nil {
			return err
		}
		*root = r
	}
	if *binDir == "" {
		*binDir = os.Getenv("GPUADMIT_E2E_BIN")
	}
	if *binDir == "" {
		*binDir = filepath.Join(*root, "test/e2e/.bin/v1.37.0")
	}
	if _, err := os.Stat(filepath.Join(*binDir, "kube-apiserver")); err != nil {
		return fmt.Errorf("control-plane binaries missing in %s (run hack/e2e-binaries.sh): %w", *binDir, err)
	}
	return nil
}
