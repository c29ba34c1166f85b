package perf

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/template"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpuadmit/gpuadmit/pkg/agent/dra"
	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

var update = flag.Bool("update", false, "rewrite testdata from gpuadmit's code")

// shippedConfig is gpuadmit-scheduler's profile as deployed.
const shippedConfig = "../../deploy/scheduler/config.yaml"

// configFile is the harness's configuration of the workload.
const configFile = "testdata/performance-config.yaml"

// TestTestdata checks that testdata is what gpuadmit's code makes today:
// its driver's devices and classes, its claim templates, its shipped
// scheduler profile. go test -run TestTestdata -update rewrites it.
func TestTestdata(t *testing.T) {
	files, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if *update {
			if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(name, []byte(files[name]), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(name)
		if err != nil {
			t.Errorf("%s: %v (go test -run TestTestdata -update writes it)", name, err)
			continue
		}
		if diff := cmp.Diff(files[name], string(got)); diff != "" {
			t.Errorf("%s is stale (-want +got; go test -run TestTestdata -update rewrites it):\n%s", name, diff)
		}
	}
}

// generate makes every file of testdata, by path.
func generate() (map[string]string, error) {
	files := map[string]string{}
	for _, k := range nodeKinds {
		gpus, err := k.gpus()
		if err != nil {
			return nil, err
		}
		n, err := k.node(gpus)
		if err != nil {
			return nil, err
		}
		sl := k.slices(gpus)
		if len(sl) != 1 {
			return nil, fmt.Errorf("node kind %s: %d ResourceSlices; the createAny operation makes one per node", k.name, len(sl))
		}
		if files["testdata/nodes/"+k.name+".yaml"], err = templateOf(n); err != nil {
			return nil, err
		}
		if files["testdata/slices/"+k.name+".yaml"], err = templateOf(&sl[0]); err != nil {
			return nil, err
		}
	}
	var classes, claims []any
	for _, c := range dra.DeviceClasses(allocator.Default()) {
		classes = append(classes, &c)
	}
	var pods []weighted
	total := 0
	for _, k := range podKinds {
		claims = append(claims, k.template())
		pods = append(pods, weighted{k.weight, k.pod()})
		total += k.weight
	}
	var err error
	if files["testdata/deviceclasses.yaml"], err = byIndex(classes); err != nil {
		return nil, err
	}
	if files["testdata/claimtemplates.yaml"], err = byIndex(claims); err != nil {
		return nil, err
	}
	if files["testdata/pods.yaml"], err = byWeight(pods, total); err != nil {
		return nil, err
	}
	if err := schedulerConfigs(files); err != nil {
		return nil, err
	}
	files[configFile], err = performanceConfig(len(classes), len(claims))
	return files, err
}

// templateOf writes obj as a template of the harness (text/template with
// {{.Index}} and {{.SchedulerName}}). The marshalled text must hold no
// template action of its own.
func templateOf(obj any) (string, error) {
	b, err := yaml.Marshal(obj)
	if err != nil {
		return "", fmt.Errorf("encode %T: %w", obj, err)
	}
	s := string(b)
	if strings.Contains(s, "{{") {
		return "", fmt.Errorf("%T holds %q, which the harness would read as a template action", obj, "{{")
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		if strings.TrimSpace(l) != "creationTimestamp: null" {
			lines = append(lines, l)
		}
	}
	s = strings.Join(lines, "\n") + "\n"
	s = strings.ReplaceAll(s, index, "{{.Index}}")
	return strings.ReplaceAll(s, schedulerName, "{{.SchedulerName}}"), nil
}

// byIndex is one template for a createAny operation of len(objs) objects:
// the i-th object at index i.
func byIndex(objs []any) (string, error) {
	var b strings.Builder
	for i, o := range objs {
		s, err := templateOf(o)
		if err != nil {
			return "", err
		}
		if i == 0 {
			fmt.Fprintf(&b, "{{- if eq .Index %d }}\n", i)
		} else {
			fmt.Fprintf(&b, "{{- else if eq .Index %d }}\n", i)
		}
		b.WriteString(s)
	}
	b.WriteString("{{- end }}\n")
	return b.String(), nil
}

type weighted struct {
	weight int
	obj    any
}

// byWeight is one pod template for a createPods operation: of every total
// pods in a row, the kinds in order, each weight times.
func byWeight(objs []weighted, total int) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "{{- $k := Mod .Index %d }}\n", total)
	upto := 0
	for i, o := range objs {
		s, err := templateOf(o.obj)
		if err != nil {
			return "", err
		}
		upto += o.weight
		switch {
		case i == 0:
			fmt.Fprintf(&b, "{{- if lt $k %d }}\n", upto)
		case i == len(objs)-1:
			b.WriteString("{{- else }}\n")
		default:
			fmt.Fprintf(&b, "{{- else if lt $k %d }}\n", upto)
		}
		b.WriteString(s)
	}
	b.WriteString("{{- end }}\n")
	return b.String(), nil
}

// schedulerConfigs are the four scheduler configurations: gpuadmit's
// shipped profile (percentageOfNodesToScore 100) and the same without
// percentageOfNodesToScore (the default), and the stock profile at 100
// and at the default.
func schedulerConfigs(files map[string]string) error {
	raw, err := os.ReadFile(shippedConfig)
	if err != nil {
		return err
	}
	cm := corev1.ConfigMap{}
	if err := yaml.UnmarshalStrict(raw, &cm); err != nil {
		return fmt.Errorf("%s: %w", shippedConfig, err)
	}
	shipped := cm.Data["config.yaml"]
	const pct = "percentageOfNodesToScore: 100\n"
	if strings.Count(shipped, pct) != 1 {
		return fmt.Errorf("%s: config.yaml sets no %q; the benchmark compares both profiles at it", shippedConfig, strings.TrimSpace(pct))
	}
	head := "# Generated by TestTestdata from deploy/scheduler/config.yaml (data.config.yaml)"
	files["testdata/scheduler/gpuadmit-100.yaml"] = head + ", as shipped.\n" + shipped
	files["testdata/scheduler/gpuadmit-default.yaml"] = head + ",\n# without percentageOfNodesToScore: the default.\n" + strings.Replace(shipped, pct, "", 1)
	stock := "# Generated by TestTestdata: the stock profile%s.\napiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n%sprofiles:\n  - schedulerName: default-scheduler\n"
	files["testdata/scheduler/stock-100.yaml"] = fmt.Sprintf(stock, " at percentageOfNodesToScore 100", pct)
	files["testdata/scheduler/stock-default.yaml"] = fmt.Sprintf(stock, " at the default percentageOfNodesToScore", "")
	return nil
}

// testCase is one scheduler configuration of the workload.
type testCase struct {
	Name, Config, Scheduler, About string
	// Labels select it with -perf-scheduling-label-filter.
	Labels string
}

// testCases are in the order the harness runs them (every workload of
// one before the next); with -bench selecting one workload size, a stock
// run comes just before each GPUAdmit run at the same percentage.
var testCases = []testCase{
	{"Stock_Pct100", "testdata/scheduler/stock-100.yaml", "default-scheduler", "the stock profile, percentageOfNodesToScore 100", ""},
	{"GPUAdmit_Pct100_Shipped", "testdata/scheduler/gpuadmit-100.yaml", "gpuadmit-scheduler", "GPUAdmit's profile as shipped (percentageOfNodesToScore 100)", "shipped"},
	{"Stock_PctDefault", "testdata/scheduler/stock-default.yaml", "default-scheduler", "the stock profile, default percentageOfNodesToScore", ""},
	{"GPUAdmit_PctDefault", "testdata/scheduler/gpuadmit-default.yaml", "gpuadmit-scheduler", "GPUAdmit's profile, default percentageOfNodesToScore", ""},
}

// workload is one size of the workload.
type workload struct {
	Name, Labels       string
	Nodes              map[string]int
	InitPods, MeasPods int
}

var workloads = []workload{
	{Name: "smoke", Labels: "smoke", Nodes: nodeCounts(50), InitPods: 20, MeasPods: 20},
	{Name: "500Nodes", Labels: "performance", Nodes: nodeCounts(500), InitPods: 1000, MeasPods: 500},
	{Name: "5000Nodes", Labels: "performance", Nodes: nodeCounts(5000), InitPods: 500, MeasPods: 300},
}

// performanceConfig is the harness's configuration: every test case runs
// the same operations, pods asking for its profile.
func performanceConfig(classes, claims int) (string, error) {
	tmpl, err := template.New("config").Parse(configTemplate)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	type kind struct{ Name, Param string }
	var kinds []kind
	for _, k := range nodeKinds {
		kinds = append(kinds, kind{k.name, k.param})
	}
	err = tmpl.Execute(&b, map[string]any{
		"Cases": testCases, "Workloads": workloads, "Kinds": kinds,
		"Classes": classes, "Claims": claims, "Metrics": metricsConfig(),
	})
	return b.String(), err
}

// The harness's own metric collection (its default set names no GPUAdmit),
// with the scheduling algorithm's duration (the cycle before binding), the
// denominator of GPUAdmit's share. GPUAdmit's own histogram
// (gpuadmit_scheduler_placement_duration_seconds) is left out: the harness
// resets only the scheduler's metrics between runs, so it would add up
// every run of the process; the counting wrapper times PreScore instead.
// Plugin names are those of the profiles' filter and score plugins.
func metricsConfig() string {
	return `    metrics:
      scheduler_scheduling_attempt_duration_seconds:
      - label: result
        values: [scheduled, unschedulable, error]
      scheduler_pod_scheduling_duration_seconds: null
      scheduler_framework_extension_point_duration_seconds:
      - label: extension_point
        values: [PreFilter, Filter, PostFilter, PreScore, Score, Reserve, Permit, PreBind, Bind]
      scheduler_plugin_execution_duration_seconds:
      - label: plugin
        values: [GPUAdmit, DynamicResources, NodeResourcesFit, NodeResourcesBalancedAllocation, NodeAffinity, TaintToleration, PodTopologySpread, InterPodAffinity, ImageLocality]
      - label: extension_point
        values: [PreFilter, Filter, PreScore, Score]
      scheduler_scheduling_algorithm_duration_seconds: null
`
}

const configTemplate = `# Generated by TestTestdata (go test -run TestTestdata -update): the
# gpuadmit workload in scheduler_perf's configuration format, run by
# BenchmarkPerfSchedulingGPUAdmit and TestSmoke.
#
# Nodes: eight GPUs each, served by gpuadmit's DRA driver (testdata/nodes,
# testdata/slices):{{range .Kinds}} {{.Name}} ${{.Param}};{{end}}
# pools h100 and h200. Pods (testdata/pods.yaml), of every ten: 4 shares
# of 10 GiB pinned to pool h100, 2 of 20 GiB pinned to h200, 3 that accept
# a MIG 1g.10gb slice of an H100, else a 9 GiB share of an H100, else one
# of an H200, and 1 that accepts a whole H100, else a whole H200. The init
# pods fill the cluster first; the measured pods are those of namespace test.
{{- range $c := .Cases}}

# {{$c.About}}.
- name: {{$c.Name}}
{{- if $c.Labels}}
  labels: [{{$c.Labels}}]
{{- end}}
  schedulerConfigPath: {{$c.Config}}
  featureGates:
    DynamicResourceAllocation: true
  metricsCollectorConfig:
{{$.Metrics}}  workloadTemplate:
{{- range $.Kinds}}
  - opcode: createNodes
    nodeTemplatePath: testdata/nodes/{{.Name}}.yaml
    countParam: ${{.Param}}
  - opcode: createAny
    templatePath: testdata/slices/{{.Name}}.yaml
    countParam: ${{.Param}}
{{- end}}
  - opcode: createAny
    templatePath: testdata/deviceclasses.yaml
    count: {{$.Classes}}
  - opcode: createAny
    templatePath: testdata/claimtemplates.yaml
    namespace: init
    count: {{$.Claims}}
  - opcode: createAny
    templatePath: testdata/claimtemplates.yaml
    namespace: test
    count: {{$.Claims}}
  - opcode: createPods
    namespace: init
    countParam: $initPods
    podTemplatePath: testdata/pods.yaml
    templateParams:
      SchedulerName: {{$c.Scheduler}}
  - opcode: createPods
    namespace: test
    countParam: $measurePods
    podTemplatePath: testdata/pods.yaml
    templateParams:
      SchedulerName: {{$c.Scheduler}}
    collectMetrics: true
  workloads:
{{- range $w := $.Workloads}}
  - name: {{$w.Name}}
    labels: [{{$w.Labels}}]
    params:
{{- range $k := $.Kinds}}
      {{$k.Param}}: {{index $w.Nodes $k.Param}}
{{- end}}
      initPods: {{$w.InitPods}}
      measurePods: {{$w.MeasPods}}
{{- end}}
{{- end}}
`
