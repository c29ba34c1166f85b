package packing

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Node is one GPU node of the trace's cluster (openb_node_list_gpu_node.csv).
type Node struct {
	Name      string
	MilliCPU  int64
	MemoryMiB int64
	GPUs      int
	Model     string
}

// Pod is one task of a trace workload (openb_pod_list_*.csv). GPUMilli is per
// GPU: 1000 is a whole GPU, less is a share of one GPU (GPUs is then 1).
type Pod struct {
	Name      string
	MilliCPU  int64
	MemoryMiB int64
	GPUs      int
	GPUMilli  int64
	Spec      string
}

// GPUMilliTotal is the milli-GPU the pod asks for in all.
func (p Pod) GPUMilliTotal() int64 { return p.GPUMilli * int64(p.GPUs) }

// Shared reports whether the pod asks for a share of one GPU.
func (p Pod) Shared() bool { return p.GPUs == 1 && p.GPUMilli > 0 && p.GPUMilli < milliPerGPU }

// PodLists are the trace's 24 pod lists (docs/trace.md): the default one;
// those with more CPU-only tasks (cpu*), with more GPU-sharing tasks
// (gpushare*), with more tasks pinned to GPU models (gpuspec*) and with
// more multi-GPU tasks (multigpu*).
var PodLists = []string{
	"default",
	"cpu0", "cpu037", "cpu050", "cpu072", "cpu100", "cpu200", "cpu235", "cpu250", "cpu300",
	"gpushare20", "gpushare40", "gpushare60", "gpushare80", "gpushare100",
	"gpuspec05", "gpuspec10", "gpuspec20", "gpuspec25", "gpuspec33",
	"multigpu20", "multigpu30", "multigpu40", "multigpu50",
}

// NodeFile is the protocol's cluster: the trace's GPU nodes.
const NodeFile = "openb_node_list_gpu_node.csv"

// PodFile is the file of the workload named name ("default", "gpushare40", …);
// a name ending in .csv is taken as the file name itself.
func PodFile(name string) string {
	if strings.HasSuffix(name, ".csv") {
		return name
	}
	return "openb_pod_list_" + name + ".csv"
}

// clusterFile is the cluster file named, NodeFile when none is.
func clusterFile(name string) string {
	if name == "" {
		return NodeFile
	}
	return name
}

// LoadNodes reads the cluster file (NodeFile unless named) of a trace directory.
func LoadNodes(dir, file string) ([]Node, error) {
	var nodes []Node
	err := readCSV(filepath.Join(dir, clusterFile(file)), []string{"sn", "cpu_milli", "memory_mib", "gpu", "model"},
		func(r row) error {
			n := Node{Name: r.str("sn"), MilliCPU: r.int("cpu_milli"), MemoryMiB: r.int("memory_mib"),
				GPUs: int(r.int("gpu")), Model: r.str("model")}
			if r.err == nil && n.GPUs < 0 {
				return errors.New("gpu is negative")
			}
			nodes = append(nodes, n)
			return r.err
		})
	return nodes, err
}

// LoadPods reads the workload name of a trace directory. Only the first five
// columns are needed; gpu_spec is read where the file has it.
func LoadPods(dir, name string) ([]Pod, error) {
	var pods []Pod
	err := readCSV(filepath.Join(dir, PodFile(name)), []string{"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"},
		func(r row) error {
			p := Pod{Name: r.str("name"), MilliCPU: r.int("cpu_milli"), MemoryMiB: r.int("memory_mib"),
				GPUs: int(r.int("num_gpu")), GPUMilli: r.int("gpu_milli"), Spec: r.str("gpu_spec")}
			if r.err != nil {
				return r.err
			}
			pods = append(pods, p)
			return validPod(p)
		})
	return pods, err
}

func validPod(p Pod) error {
	switch {
	case p.GPUs < 0 || p.GPUMilli < 0 || p.GPUMilli > milliPerGPU:
		return fmt.Errorf("num_gpu %d, gpu_milli %d: out of range", p.GPUs, p.GPUMilli)
	case p.GPUs > 1 && p.GPUMilli != milliPerGPU:
		return fmt.Errorf("num_gpu %d with gpu_milli %d: a share is of one GPU only", p.GPUs, p.GPUMilli)
	case (p.GPUs == 0) != (p.GPUMilli == 0):
		return fmt.Errorf("num_gpu %d with gpu_milli %d: both or neither must be 0", p.GPUs, p.GPUMilli)
	}
	return nil
}

// row is one CSV record with its header; the first field error sticks in err.
type row struct {
	cols   map[string]int
	fields []string
	err    error
}

func (r *row) str(col string) string {
	i, ok := r.cols[col]
	if !ok || i >= len(r.fields) {
		return ""
	}
	return r.fields[i]
}

func (r *row) int(col string) int64 {
	v, err := strconv.ParseInt(strings.TrimSpace(r.str(col)), 10, 64)
	if err != nil && r.err == nil {
		r.err = fmt.Errorf("column %s: %q is not an integer", col, r.str(col))
	}
	return v
}

// readCSV calls each for every record after the header, which must hold
// required. Errors name the file and line.
func readCSV(path string, required []string, each func(row) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	cr := csv.NewReader(f)
	cr.FieldsPerRecord = -1
	cols, err := header(cr, required)
	if err != nil {
		return fmt.Errorf("%s:1: %w", path, err)
	}
	for {
		fields, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		line, _ := cr.FieldPos(0)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := each(row{cols: cols, fields: fields}); err != nil {
			return fmt.Errorf("%s:%d: %w", path, line, err)
		}
	}
}

func header(cr *csv.Reader, required []string) (map[string]int, error) {
	names, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	cols := make(map[string]int, len(names))
	for i, n := range names {
		cols[strings.TrimSpace(n)] = i
	}
	for _, c := range required {
		if _, ok := cols[c]; !ok {
			return nil, fmt.Errorf("header lacks column %s", c)
		}
	}
	return cols, nil
}
