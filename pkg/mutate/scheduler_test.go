package mutate

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuadmit/gpuadmit/pkg/mutate/decide"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
)

// engineWithData loads the default policy set with its data.yaml edited:
// each old → new replaced once.
func engineWithData(t *testing.T, replace ...string) *policy.Engine {
	t.Helper()
	dir := t.TempDir()
	files, _ := filepath.Glob("../../policies/*.[ry]*")
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s := string(raw)
		if filepath.Base(f) == "data.yaml" {
			for i := 0; i+1 < len(replace); i += 2 {
				if !strings.Contains(s, replace[i]) {
					t.Fatalf("data.yaml has no %q", replace[i])
				}
				s = strings.Replace(s, replace[i], replace[i+1], 1)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e := policy.NewEngine(policy.Options{})
	if _, err := e.Load(context.Background(), policy.Directory(dir)); err != nil {
		t.Fatal(err)
	}
	return e
}

// TestForeignSchedulers: a pod written for KAI, Volcano or HAMi is taken
// over (migration): it gets the scheduler of its pool and loses the
// annotations only its old scheduler reads, and admitting it again changes
// nothing. default-scheduler counts as unset.
func TestForeignSchedulers(t *testing.T) {
	m := NewMutator(defaultEngine, StaticInventory{Inv: exampleInventory(t)}, MutatorOptions{})
	tests := map[string]struct {
		scheduler string
		ann       map[string]string
		limits    map[string]string
		wantSched string
		wantAnn   []string // the non-gpuadmit annotations left
		wantWarn  string
	}{
		"KAI's fraction annotations go with kai-scheduler": {scheduler: "kai-scheduler",
			ann:       map[string]string{"gpu-fraction": "0.5", "team": "a"},
			wantSched: "default-scheduler", wantAnn: []string{"team"},
			wantWarn: `spec.schedulerName "kai-scheduler" is replaced by "default-scheduler", which schedules pool h100-inference; the annotations only kai-scheduler reads, read into the request first, are removed: gpu-fraction`},
		"Volcano's annotations go with volcano": {scheduler: "volcano",
			ann: map[string]string{"volcano.sh/queue-name": "q", "volcano.sh/vgpu-mode": "mig"}, limits: map[string]string{"volcano.sh/vgpu-number": "1"},
			wantSched: "default-scheduler", wantWarn: "volcano.sh/queue-name, volcano.sh/vgpu-mode"},
		"HAMi's hints go with hami-scheduler": {scheduler: "hami-scheduler",
			ann: map[string]string{"nvidia.com/use-gputype": "H200", "hami.io/node-scheduler-policy": "binpack"}, limits: map[string]string{"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"},
			wantSched: "default-scheduler", wantWarn: "hami.io/node-scheduler-policy, nvidia.com/use-gputype"},
		"default-scheduler stays as it is": {scheduler: "default-scheduler",
			ann: map[string]string{"volcano.sh/queue-name": "q"}, limits: map[string]string{"nvidia.com/gpu": "1"},
			wantSched: "default-scheduler", wantAnn: []string{"volcano.sh/queue-name"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := pod("p", tc.limits)
			if tc.limits == nil {
				p = pod("p", map[string]string{})
			}
			p.Spec.SchedulerName, p.Annotations = tc.scheduler, tc.ann
			res := mustMutate(t, m, p)
			if !res.Allowed {
				t.Fatalf("denied: %s", res.Message)
			}
			if res.Pod.Spec.SchedulerName != tc.wantSched {
				t.Errorf("spec.schedulerName %q, want %q", res.Pod.Spec.SchedulerName, tc.wantSched)
			}
			var left []string
			for k := range res.Pod.Annotations {
				if !strings.HasPrefix(k, "gpuadmit.io/") {
					left = append(left, k)
				}
			}
			if diff := cmp.Diff(tc.wantAnn, left); diff != "" {
				t.Errorf("annotations left (-want +got):\n%s", diff)
			}
			if tc.wantWarn != "" && !strings.Contains(strings.Join(res.Warnings, "\n"), tc.wantWarn) {
				t.Errorf("warnings %q, want one saying %q", res.Warnings, tc.wantWarn)
			}
			again := mustMutate(t, m, res.Pod)
			if !again.Allowed || len(again.Patch) > 0 {
				t.Errorf("admitting the mutated pod again: allowed %v, %s, patch %v", again.Allowed, again.Message, again.Patch)
			}
		})
	}
}

// TestCoexistingSchedulerPassesUnchanged: a scheduler the data lists under
// coexist keeps its pods exactly as they are, with a warning that names
// spec.schedulerName.
func TestCoexistingSchedulerPassesUnchanged(t *testing.T) {
	e := engineWithData(t, "coexist: []", "coexist: [hami-scheduler]")
	m := NewMutator(e, StaticInventory{Inv: exampleInventory(t)}, MutatorOptions{})
	p := pod("p", map[string]string{"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"})
	p.Spec.SchedulerName = "hami-scheduler"
	p.Annotations = map[string]string{"nvidia.com/use-gputype": "A100"}
	res := mustMutate(t, m, p)
	if !res.Allowed || len(res.Patch) > 0 {
		t.Fatalf("allowed %v (%s), patch %v; want it unchanged", res.Allowed, res.Message, res.Patch)
	}
	if !strings.Contains(strings.Join(res.Warnings, "\n"), `spec.schedulerName "hami-scheduler"`) {
		t.Errorf("warnings %q do not name spec.schedulerName", res.Warnings)
	}
}

// TestPoolOwnerScheduler: a pool the data gives to another scheduler gets
// it written into the pods placed there, and a pod naming a scheduler that
// owns none of the pools it could use is denied naming spec.schedulerName.
func TestPoolOwnerScheduler(t *testing.T) {
	e := engineWithData(t, "owners: {}", "owners: {a100-40gb-mig-1g.5gb: gpuadmit-scheduler}")
	m := NewMutator(e, StaticInventory{Inv: exampleInventory(t)}, MutatorOptions{Schedulers: recorded{"a100-40gb-mig-1g.5gb": decide.GPUAdmitScheduler}})
	p := controlled(pod("p", map[string]string{"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"}))
	p.Spec.SchedulerName = "default-scheduler"
	res := mustMutate(t, m, p)
	if !res.Allowed || res.Pod.Spec.SchedulerName != "gpuadmit-scheduler" {
		t.Fatalf("allowed %v (%s), scheduler %q; want gpuadmit-scheduler", res.Allowed, res.Message, res.Pod.Spec.SchedulerName)
	}
	if again := mustMutate(t, m, res.Pod); !again.Allowed || len(again.Patch) > 0 {
		t.Errorf("admitting the mutated pod again: allowed %v, %s, patch %v", again.Allowed, again.Message, again.Patch)
	}
	e = engineWithData(t, "owners: {}", "owners: {a100-40gb-mig-1g.5gb: a, a100-80gb-whole: a, h100-inference: a, h200-141gb-mig-mixed: a, t4-shared: a}")
	m = NewMutator(e, StaticInventory{Inv: exampleInventory(t)}, MutatorOptions{})
	p.Spec.SchedulerName = "my-scheduler"
	if res := mustMutate(t, m, p); res.Allowed || !strings.Contains(res.Message, `spec.schedulerName "my-scheduler" owns no GPU pool`) {
		t.Errorf("allowed %v, message %q; want a denial naming spec.schedulerName", res.Allowed, res.Message)
	}
}

// A pod taken over from another scheduler and sealed comes back (reinvoked
// by a later webhook) unchanged: the seal covers gpuadmit.io/scheduler,
// which records what the takeover removed.
func TestSealedTakeoverComesBackUnchanged(t *testing.T) {
	m := NewMutator(defaultEngine, StaticInventory{Inv: exampleInventory(t)}, MutatorOptions{RecordKeys: record.KeySet{Current: key1}})
	p := pod("p", map[string]string{})
	p.Spec.SchedulerName, p.Annotations = "kai-scheduler", map[string]string{"gpu-fraction": "0.5"}
	res := mustMutate(t, m, p)
	if !res.Allowed || res.Pod.Spec.SchedulerName != "default-scheduler" {
		t.Fatalf("allowed %v, scheduler %q: %s", res.Allowed, res.Pod.Spec.SchedulerName, res.Message)
	}
	again := mustMutate(t, m, res.Pod)
	if !again.Allowed || len(again.Patch) > 0 {
		t.Errorf("the sealed takeover again: allowed %v, %s, patch %v", again.Allowed, again.Message, again.Patch)
	}
}

// recorded is a SchedulerSource: gpuadmit-scheduler runs, and the record
// gives each pool the state named, "default-scheduler" where none is.
type recorded map[string]string

func (recorded) Live() []string { return []string{decide.GPUAdmitScheduler} }

func (r recorded) PoolOwner(pool string) string {
	if s, ok := r[pool]; ok {
		return s
	}
	if s, ok := r["*"]; ok {
		return s
	}
	return corev1.DefaultSchedulerName
}

// controlled gives p a controller, a ReplicaSet.
func controlled(p *corev1.Pod) *corev1.Pod {
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs-uid", Controller: ptr.To(true)}}
	return p
}

// TestGPUAdmitSchedulerOnlyWhereRecordedAndReplaceable: the webhook gives
// gpuadmit-scheduler a pool only where the controller's record lets it own
// the pool, and only to a pod a controller would create again should
// gpuadmit-scheduler go away; it admits no pod to a pool being released.
func TestGPUAdmitSchedulerOnlyWhereRecordedAndReplaceable(t *testing.T) {
	tests := map[string]struct {
		record    recorded
		bare      bool
		template  bool   // a Kueue Job's pod template: its pods will have the Job as controller
		scheduler string // want, on an admitted pod; "" is left as it arrived, for the stock scheduler
		denial    string // want in the message, on a denied one
	}{
		"no record: the stock scheduler": {record: recorded{}},
		"recorded for gpuadmit-scheduler, a controlled pod": {
			record: recorded{"*": decide.GPUAdmitScheduler}, scheduler: decide.GPUAdmitScheduler,
		},
		"recorded for gpuadmit-scheduler, a bare pod is refused it": {
			record: recorded{"*": decide.GPUAdmitScheduler}, bare: true,
			denial: "pool a100-80gb-whole: it is scheduled by gpuadmit-scheduler, which gpuadmit gives only pods a controller (Deployment, Job, StatefulSet…) creates again",
		},
		"every pool being released: denied until it is done": {
			record: recorded{"*": decide.PoolReleasing},
			denial: "pool a100-80gb-whole: gpuadmit-scheduler's Lease expired and the pods that waited for it there are being replaced",
		},
		"a bare pod on a stock pool is admitted as ever": {record: recorded{}, bare: true},
		"a Job's pod template is not bare": {
			record: recorded{"*": decide.GPUAdmitScheduler}, bare: true, template: true, scheduler: decide.GPUAdmitScheduler,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := NewMutator(defaultEngine, StaticInventory{Inv: exampleInventory(t)}, MutatorOptions{Schedulers: tc.record})
			p := pod("p", map[string]string{"nvidia.com/gpu": "1"})
			if !tc.bare {
				p = controlled(p)
			}
			res, err := m.Mutate(context.Background(), Request{Pod: p, Template: tc.template})
			if err != nil {
				t.Fatal(err)
			}
			if tc.denial != "" {
				if res.Allowed || !strings.Contains(res.Message, tc.denial) {
					t.Errorf("allowed %v, message %q; want a denial containing %q", res.Allowed, res.Message, tc.denial)
				}
				return
			}
			if !res.Allowed || res.Pod.Spec.SchedulerName != tc.scheduler {
				t.Errorf("allowed %v (%s), spec.schedulerName %q; want %q", res.Allowed, res.Message, res.Pod.Spec.SchedulerName, tc.scheduler)
			}
		})
	}
}
