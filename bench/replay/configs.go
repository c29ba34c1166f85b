package replay

import (
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// The scheduler configurations a replay compares.
const (
	// Default is the stock kube-scheduler's default profile.
	Default = "default"
	// MostAllocated is the stock kube-scheduler with NodeResourcesFit
	// scoring MostAllocated, the GPU resource weighted 3, on every node.
	MostAllocated = "mostallocated"
	// GPUAdmit is gpuadmit-scheduler with deploy/scheduler's profile.
	GPUAdmit = "gpuadmit"
)

// Configurations are the configurations in the order a replay runs them.
var Configurations = []string{Default, MostAllocated, GPUAdmit}

// scheduler is one configuration: the binary and its
// KubeSchedulerConfiguration, and the schedulerName its pods name.
type scheduler struct {
	config   string
	gpuadmit bool // the gpuadmit-scheduler binary, else kube-scheduler
	name     string
	profile  map[string]any
	// product runs gpuadmit's webhook and controller, and pods go through
	// them as a user writes them (ProductPod); onePool runs the webhook
	// with --no-dra-alternatives; pick with --pool-pick=expected, else
	// --pool-pick=order.
	product, onePool, pick bool
}

// schedulerConfig returns configuration config; root is the repository
// (deploy/scheduler's profile is read from it).
func schedulerConfig(config, root string) (scheduler, error) {
	switch config {
	case Default:
		return scheduler{config: config, name: corev1.DefaultSchedulerName,
			profile: stockProfile(map[string]any{"schedulerName": corev1.DefaultSchedulerName})}, nil
	case MostAllocated:
		// Scored over every node, as gpuadmit-scheduler's profile is: a
		// user who configures the stock scheduler to pack would set it
		// too, and the default (about 41% of 1,213 nodes) would leave
		// the comparison to which nodes happened to be scored.
		p := stockProfile(map[string]any{
			"schedulerName": corev1.DefaultSchedulerName,
			"pluginConfig": []any{map[string]any{"name": "NodeResourcesFit", "args": map[string]any{
				"scoringStrategy": map[string]any{"type": "MostAllocated", "resources": []any{
					map[string]any{"name": "cpu", "weight": 1},
					map[string]any{"name": "memory", "weight": 1},
					map[string]any{"name": allocator.ResourceMemoryMiB, "weight": 3},
				}},
			}}},
		})
		p["percentageOfNodesToScore"] = 100
		return scheduler{config: config, name: corev1.DefaultSchedulerName, profile: p}, nil
	case GPUAdmit:
		p, err := shippedProfile(root, false)
		if err != nil {
			return scheduler{}, err
		}
		return scheduler{config: config, gpuadmit: true, name: "gpuadmit-scheduler", profile: p}, nil
	case ProductGPUAdmit:
		// Leader election stays on, as deployed: gpuadmit's controller
		// gives gpuadmit-scheduler the pools only while its leader renews
		// the Lease, and only then does the webhook name it in GPU pods.
		p, err := shippedProfile(root, true)
		if err != nil {
			return scheduler{}, err
		}
		patientLease(p)
		return scheduler{config: config, gpuadmit: true, name: "gpuadmit-scheduler", profile: p, product: true}, nil
	case ProductStock, ProductOnePool, ProductPick:
		return scheduler{config: config, name: corev1.DefaultSchedulerName, product: true, onePool: config != ProductStock, pick: config == ProductPick,
			profile: stockProfile(map[string]any{"schedulerName": corev1.DefaultSchedulerName})}, nil
	}
	return scheduler{}, fmt.Errorf("configuration %q: want one of %v", config, AllConfigurations)
}

// stockProfile is a KubeSchedulerConfiguration of one profile, everything
// else default but what benchConfig changes.
func stockProfile(profile map[string]any) map[string]any {
	return benchConfig(map[string]any{
		"apiVersion": "kubescheduler.config.k8s.io/v1",
		"kind":       "KubeSchedulerConfiguration",
		"profiles":   []any{profile},
	})
}

// Client rate limits of every configuration's scheduler: the default (50
// queries per second, bursts of 100) throttles binding, two writes per pod
// with DRA (the claim's allocation, the binding), to about 20 pods a
// second, and pods wait bound in memory for minutes. Scheduling decisions
// do not depend on it (a pod is assumed on its node before it is bound).
const (
	clientQPS   = 2000
	clientBurst = 4000
)

// benchConfig turns off leader election (one replica, no Lease to wait
// for) and raises the client's rate limits.
func benchConfig(config map[string]any) map[string]any {
	config["leaderElection"] = map[string]any{"leaderElect": false}
	config["clientConnection"] = map[string]any{"qps": clientQPS, "burst": clientBurst}
	return config
}

// patientLease lengthens the Lease of the profile's leader election from
// the defaults (15s, renewed within 10s): on a loaded benchmark machine an
// API server slow to answer one renewal made the leader give up, exit,
// and gpuadmit's controller replace the pods that waited for it. That is
// gpuadmit-scheduler's correct behaviour, and not what the replay
// measures; with 120s, renewed within 100s, only its timing changes.
func patientLease(config map[string]any) {
	le, _ := config["leaderElection"].(map[string]any)
	if le == nil {
		return
	}
	le["leaseDuration"], le["renewDeadline"], le["retryPeriod"] = "120s", "100s", "5s"
}

// shippedProfile is the KubeSchedulerConfiguration in deploy/scheduler's
// ConfigMap, changed as benchConfig changes every configuration; lead
// keeps its leader election.
func shippedProfile(root string, lead bool) (map[string]any, error) {
	path := filepath.Join(root, "deploy/scheduler/config.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cm := &corev1.ConfigMap{}
	if err := yaml.UnmarshalStrict(b, cm); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	config := map[string]any{}
	if err := yaml.Unmarshal([]byte(cm.Data["config.yaml"]), &config); err != nil {
		return nil, fmt.Errorf("read %s: config.yaml: %w", path, err)
	}
	election := config["leaderElection"]
	config = benchConfig(config)
	if lead {
		config["leaderElection"] = election
	}
	return config, nil
}
