package report

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/mutate"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
	"github.com/gpuadmit/gpuadmit/pkg/quota"
	"github.com/gpuadmit/gpuadmit/pkg/usage"
)

// Config reads data.gpuadmit.usage (prices, typical sizes) from the policy
// directory dir, or from the embedded default policies when dir is "".
func Config(ctx context.Context, dir string) (usage.Config, error) {
	src := policy.Embedded()
	if dir != "" {
		src = policy.Directory(dir)
	}
	set, err := policy.Compile(ctx, src)
	if err != nil {
		return usage.Config{}, fmt.Errorf("load policies: %w", err)
	}
	return usage.FromData(set.Data)
}

// Objects are what the report reads besides the Nodes.
type Objects struct {
	Pods   []*corev1.Pod
	Quotas []corev1.ResourceQuota
	Slices []resourceapi.ResourceSlice
	Claims []resourceapi.ResourceClaim
}

// Input is the usage input of nodes and objs, as the webhook's leader
// builds it from its caches: the inventory of the nodes (and of the DRA
// nodes' ResourceSlices), gpuadmit's pods (label gpuadmit.io/managed),
// gpuadmit's ResourceQuotas only, and the GPUs the claims name. Unlike
// the leader, it counts the CPU and memory of the other pods objs holds
// (usage.Input.Others), which the leader does not cache.
func Input(nodes []corev1.Node, objs Objects, cfg usage.Config) usage.Input {
	in := usage.Input{Inventory: inventory.BuildWithSlices(nodes, objs.Slices, allocator.Default()), Nodes: nodes, Config: cfg}
	for _, p := range objs.Pods {
		if p.Labels[mutate.LabelManaged] == "true" {
			in.Pods = append(in.Pods, p)
		} else {
			in.Others = append(in.Others, p)
		}
	}
	for _, q := range objs.Quotas {
		if q.Name == quota.Name {
			in.Quotas = append(in.Quotas, q)
		}
	}
	if len(objs.Slices) > 0 || len(objs.Claims) > 0 {
		in.GPUs = usage.DRAGPUs(objs.Slices, objs.Claims)
		in.ClaimDevices = usage.ClaimDevices(objs.Claims)
		in.PodClaims = usage.PodClaims(objs.Slices, objs.Claims)
	}
	return in
}

// Files reads the Nodes of nodesFile (as `gpuadmit mutate --nodes` does)
// and the Pods, ResourceQuotas, ResourceClaims and ResourceSlices of
// objectsFile (`kubectl get pods,resourcequotas -A -o yaml`; Lists and
// "---" documents; other kinds are refused, so a wrong file is not read as
// an empty cluster).
func Files(nodesFile, objectsFile string, cfg usage.Config) (usage.Input, error) {
	f, err := os.Open(nodesFile)
	if err != nil {
		return usage.Input{}, fmt.Errorf("read nodes: %w", err)
	}
	defer f.Close()
	nodes, err := inventory.ReadNodes(f)
	if err != nil {
		return usage.Input{}, fmt.Errorf("read nodes from %s: %w", nodesFile, err)
	}
	var objs Objects
	if objectsFile != "" {
		g, err := os.Open(objectsFile)
		if err != nil {
			return usage.Input{}, fmt.Errorf("read pods: %w", err)
		}
		defer g.Close()
		if objs, err = ReadObjects(g); err != nil {
			return usage.Input{}, fmt.Errorf("read pods from %s: %w", objectsFile, err)
		}
	}
	return Input(nodes, objs, cfg), nil
}

// ReadObjects reads Pods, ResourceQuotas, ResourceClaims and ResourceSlices
// from a YAML or JSON stream of objects and Lists.
func ReadObjects(r io.Reader) (Objects, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	var objs Objects
	for i := 0; ; i++ {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return Objects{}, fmt.Errorf("document %d: %w", i, err)
		}
		if err := objs.add(doc); err != nil {
			return Objects{}, fmt.Errorf("document %d: %w", i, err)
		}
	}
}

func (o *Objects) add(doc map[string]any) error {
	kind, _ := doc["kind"].(string)
	var err error
	switch kind {
	case "":
		if len(doc) > 0 {
			return errors.New("object has no kind")
		}
	case "List", "PodList", "ResourceQuotaList", "ResourceClaimList", "ResourceSliceList":
		items, _ := doc["items"].([]any)
		for i, item := range items {
			m, ok := item.(map[string]any)
			if !ok {
				return fmt.Errorf("items[%d]: not an object", i)
			}
			if kind != "List" && m["kind"] == nil {
				m["kind"] = kind[:len(kind)-len("List")] // typed lists' items may omit it
			}
			if err := o.add(m); err != nil {
				return fmt.Errorf("items[%d]: %w", i, err)
			}
		}
	case "Pod":
		p := &corev1.Pod{}
		if err = convert(doc, p); err == nil {
			o.Pods = append(o.Pods, p)
		}
	case "ResourceQuota":
		var q corev1.ResourceQuota
		if err = convert(doc, &q); err == nil {
			o.Quotas = append(o.Quotas, q)
		}
	case "ResourceClaim":
		var c resourceapi.ResourceClaim
		if err = convert(doc, &c); err == nil {
			o.Claims = append(o.Claims, c)
		}
	case "ResourceSlice":
		var s resourceapi.ResourceSlice
		if err = convert(doc, &s); err == nil {
			o.Slices = append(o.Slices, s)
		}
	default:
		return fmt.Errorf("kind %s: want Pods, ResourceQuotas, ResourceClaims or ResourceSlices", kind)
	}
	return err
}

// convert decodes doc into a typed object as `kubectl apply` would read
// the YAML: through JSON, so quantities written as numbers decode.
func convert(doc map[string]any, into any) error {
	b, err := yaml.Marshal(doc)
	if err != nil {
		return err
	}
	return yaml.Unmarshal(b, into)
}

// Cluster lists what the webhook's leader caches from the API server:
// Nodes, gpuadmit's pods, the ResourceQuotas and, where the cluster serves
// resource.k8s.io/v1, ResourceSlices and ResourceClaims.
func Cluster(ctx context.Context, c client.Reader, cfg usage.Config) (usage.Input, error) {
	var nodes corev1.NodeList
	var pods corev1.PodList
	var rqs corev1.ResourceQuotaList
	if err := c.List(ctx, &nodes); err != nil {
		return usage.Input{}, fmt.Errorf("list Nodes: %w", err)
	}
	if err := c.List(ctx, &pods, client.MatchingLabels{mutate.LabelManaged: "true"}); err != nil {
		return usage.Input{}, fmt.Errorf("list Pods: %w", err)
	}
	if err := c.List(ctx, &rqs); err != nil {
		return usage.Input{}, fmt.Errorf("list ResourceQuotas: %w", err)
	}
	var objs Objects
	for i := range pods.Items {
		objs.Pods = append(objs.Pods, &pods.Items[i])
	}
	objs.Quotas = rqs.Items
	var slices resourceapi.ResourceSliceList
	var claims resourceapi.ResourceClaimList
	for _, l := range []client.ObjectList{&slices, &claims} {
		if err := c.List(ctx, l); err != nil {
			if meta.IsNoMatchError(err) {
				return Input(nodes.Items, objs, cfg), nil // no DRA on this cluster
			}
			return usage.Input{}, fmt.Errorf("list %T: %w", l, err)
		}
	}
	objs.Slices, objs.Claims = slices.Items, claims.Items
	return Input(nodes.Items, objs, cfg), nil
}
