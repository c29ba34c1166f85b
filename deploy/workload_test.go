package deploy_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/gpuadmit/gpuadmit/certs"
)

// podLabels are the webhook pods' labels; Service, PDB, anti-affinity and
// spread constraints must all select them.
var podLabels = labels.Set{"app.kubernetes.io/name": "gpuadmit", "app.kubernetes.io/component": "webhook"}

// checkCommon asserts what every variant shares: the operating rules.
func checkCommon(t *testing.T, objs objects, policiesArg string) {
	t.Helper()
	get[*corev1.Namespace](t, objs, "Namespace", "", namespace)
	checkRBAC(t, objs)
	checkDeployment(t, objs, policiesArg)
	checkRoles(t, objs, policiesArg)
	checkControllerPolicy(t, objs)
	checkService(t, objs)
	checkPDB(t, objs)
	checkPriorityClasses(t, objs)
	checkWebhooks(t, objs)
}

// checkRBAC: the webhook's account only reads (and records Events), the
// controller's writes only ResourceQuotas, ResourceClaimTemplates, the
// ConfigMap gpuadmit-scheduler-pools and pod deletions (which its
// admission policy narrows to gpuadmit's own and to pods waiting for
// gpuadmit-scheduler), each Lease right is
// limited to one Lease by name, and nothing else in the rendering grants
// anything. This is the whole list.
func checkRBAC(t *testing.T, objs objects) {
	t.Helper()
	grants := map[key]string{ // each Role and ClusterRole → the one ServiceAccount bound to it
		{"ClusterRole", "", "gpuadmit-usage"}:           controllerAccount, // the usage metrics' reads
		{"ClusterRole", "", "gpuadmit"}:                 serviceAccount,
		{"Role", namespace, "gpuadmit-webhook"}:         serviceAccount,
		{"ClusterRole", "", "gpuadmit-controller"}:      controllerAccount,
		{"Role", namespace, "gpuadmit-leader-election"}: controllerAccount,
		{"Role", namespace, "gpuadmit-controller"}:      controllerAccount,
	}
	for k := range objs {
		if !strings.HasSuffix(k.Kind, "Role") && !strings.HasSuffix(k.Kind, "RoleBinding") {
			continue
		}
		role := key{strings.TrimSuffix(k.Kind, "Binding"), k.Namespace, k.Name}
		if _, ok := grants[role]; !ok {
			t.Errorf("unexpected %s: gpuadmit's grants are ClusterRoles gpuadmit and gpuadmit-controller, Roles gpuadmit-webhook, gpuadmit-leader-election and gpuadmit-controller", k)
		}
	}
	want := map[key][]string{
		{"ClusterRole", "", "gpuadmit-usage"}: {
			"/nodes:get", "/nodes:list", "/nodes:watch",
			"resource.k8s.io/deviceclasses:get", "resource.k8s.io/deviceclasses:list", "resource.k8s.io/deviceclasses:watch",
			"resource.k8s.io/resourceclaims:get", "resource.k8s.io/resourceclaims:list", "resource.k8s.io/resourceclaims:watch",
			"resource.k8s.io/resourceslices:get", "resource.k8s.io/resourceslices:list", "resource.k8s.io/resourceslices:watch",
		},
		{"ClusterRole", "", "gpuadmit"}: {
			"/events:create", "/events:patch",
			"/namespaces:get", "/namespaces:list", "/namespaces:watch",
			"/nodes:get", "/nodes:list", "/nodes:watch",
			"/pods:get", "/pods:list", "/pods:watch",
			"/resourcequotas:get", "/resourcequotas:list", "/resourcequotas:watch",
			"batch/jobs:get",
			"events.k8s.io/events:create", "events.k8s.io/events:patch",
			"resource.k8s.io/deviceclasses:get", "resource.k8s.io/deviceclasses:list", "resource.k8s.io/deviceclasses:watch",
			"resource.k8s.io/resourceclaims:get", "resource.k8s.io/resourceclaims:list", "resource.k8s.io/resourceclaims:watch",
			"resource.k8s.io/resourceslices:get", "resource.k8s.io/resourceslices:list", "resource.k8s.io/resourceslices:watch",
			"scheduling.k8s.io/priorityclasses:get", "scheduling.k8s.io/priorityclasses:list", "scheduling.k8s.io/priorityclasses:watch",
		},
		{"Role", namespace, "gpuadmit-webhook"}: {
			"/configmaps[gpuadmit-scheduler-pools]:get", "/configmaps[gpuadmit-scheduler-pools]:list", "/configmaps[gpuadmit-scheduler-pools]:watch",
			"coordination.k8s.io/leases[gpuadmit-scheduler]:get", "coordination.k8s.io/leases[gpuadmit-scheduler]:list", "coordination.k8s.io/leases[gpuadmit-scheduler]:watch",
		},
		{"ClusterRole", "", "gpuadmit-controller"}: {
			"/events:create", "/events:patch",
			"/namespaces:get", "/namespaces:list", "/namespaces:watch",
			"/pods:delete", "/pods:get", "/pods:list", "/pods:watch",
			"/resourcequotas:create", "/resourcequotas:delete", "/resourcequotas:get", "/resourcequotas:list", "/resourcequotas:update", "/resourcequotas:watch",
			"events.k8s.io/events:create", "events.k8s.io/events:patch",
			"resource.k8s.io/resourceclaimtemplates:create", "resource.k8s.io/resourceclaimtemplates:delete", "resource.k8s.io/resourceclaimtemplates:get", "resource.k8s.io/resourceclaimtemplates:list", "resource.k8s.io/resourceclaimtemplates:watch",
		},
		{"Role", namespace, "gpuadmit-leader-election"}: {
			"coordination.k8s.io/leases:create",
			"coordination.k8s.io/leases[gpuadmit-quota]:get", "coordination.k8s.io/leases[gpuadmit-quota]:update",
		},
		{"Role", namespace, "gpuadmit-controller"}: {
			"/configmaps:create",
			"/configmaps[gpuadmit-scheduler-pools]:get", "/configmaps[gpuadmit-scheduler-pools]:list", "/configmaps[gpuadmit-scheduler-pools]:update", "/configmaps[gpuadmit-scheduler-pools]:watch",
			"coordination.k8s.io/leases[gpuadmit-scheduler]:get", "coordination.k8s.io/leases[gpuadmit-scheduler]:list", "coordination.k8s.io/leases[gpuadmit-scheduler]:watch",
		},
	}
	for role, wantRules := range want {
		if diff := cmp.Diff(wantRules, flatRules(t, objs, role)); diff != "" {
			t.Errorf("%s grants (-want +got):\n%s", role, diff)
		}
		checkBinding(t, objs, role, grants[role])
	}
	get[*corev1.ServiceAccount](t, objs, "ServiceAccount", namespace, serviceAccount)
	get[*corev1.ServiceAccount](t, objs, "ServiceAccount", namespace, controllerAccount)
}

// flatRules lists a Role's or ClusterRole's rules as group/resource[names]:verb, sorted.
func flatRules(t *testing.T, objs objects, role key) []string {
	t.Helper()
	var rules []rbacv1.PolicyRule
	if role.Kind == "ClusterRole" {
		rules = get[*rbacv1.ClusterRole](t, objs, role.Kind, "", role.Name).Rules
	} else {
		rules = get[*rbacv1.Role](t, objs, role.Kind, role.Namespace, role.Name).Rules
	}
	var got []string
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 {
			t.Errorf("%s rule %+v: nonResourceURLs are not expected", role, r)
		}
		names := ""
		if len(r.ResourceNames) > 0 {
			names = "[" + strings.Join(r.ResourceNames, ",") + "]"
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					got = append(got, g+"/"+res+names+":"+v)
				}
			}
		}
	}
	slices.Sort(got)
	return got
}

// checkBinding: role is bound, under its own name, to account and no one else.
func checkBinding(t *testing.T, objs objects, role key, account string) {
	t.Helper()
	var ref rbacv1.RoleRef
	var subjects []rbacv1.Subject
	if role.Kind == "ClusterRole" {
		b := get[*rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding", "", role.Name)
		ref, subjects = b.RoleRef, b.Subjects
	} else {
		b := get[*rbacv1.RoleBinding](t, objs, "RoleBinding", role.Namespace, role.Name)
		ref, subjects = b.RoleRef, b.Subjects
	}
	wantRef := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: role.Kind, Name: role.Name}
	wantSubjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: account, Namespace: namespace}}
	if ref != wantRef || !cmp.Equal(subjects, wantSubjects) {
		t.Errorf("%sBinding %s binds %+v to %+v, want %+v to %+v", role.Kind, role.Name, ref, subjects, wantRef, wantSubjects)
	}
}

func checkDeployment(t *testing.T, objs objects, policiesArg string) {
	t.Helper()
	d := get[*appsv1.Deployment](t, objs, "Deployment", namespace, "gpuadmit-webhook")
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
		t.Errorf("replicas = %s, want 3", show(d.Spec.Replicas))
	}
	if !labels.Equals(d.Spec.Selector.MatchLabels, podLabels) || !podLabels.AsSelector().Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("selector %v and pod labels %v, want both %v", d.Spec.Selector.MatchLabels, d.Spec.Template.Labels, podLabels)
	}
	pod := d.Spec.Template.Spec
	checkPodPlacement(t, pod)
	checkPodSecurity(t, pod)
	checkVolumeMounts(t, pod)
	c := container(t, pod.Containers, "webhook")
	checkWebhookContainer(t, pod, c, policiesArg)
}

func checkPodPlacement(t *testing.T, pod corev1.PodSpec) {
	t.Helper()
	if pod.PriorityClassName != "system-cluster-critical" {
		t.Errorf("priorityClassName = %q, want system-cluster-critical", pod.PriorityClassName)
	}
	if pod.ServiceAccountName != serviceAccount {
		t.Errorf("serviceAccountName = %q, want %q", pod.ServiceAccountName, serviceAccount)
	}
	if pod.TerminationGracePeriodSeconds == nil || *pod.TerminationGracePeriodSeconds != 30 {
		t.Errorf("terminationGracePeriodSeconds = %s, want 30", show(pod.TerminationGracePeriodSeconds))
	}
	spread := false
	if a := pod.Affinity; a != nil && a.PodAntiAffinity != nil {
		for _, w := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			spread = spread || (w.PodAffinityTerm.TopologyKey == corev1.LabelHostname && selects(t, w.PodAffinityTerm.LabelSelector.MatchLabels))
		}
	}
	if !spread {
		t.Errorf("no preferred podAntiAffinity by %s that selects the webhook pods: %+v", corev1.LabelHostname, pod.Affinity)
	}
	if len(pod.TopologySpreadConstraints) == 0 {
		t.Error("no topologySpreadConstraints")
	}
	for _, c := range pod.TopologySpreadConstraints {
		if c.WhenUnsatisfiable != corev1.ScheduleAnyway || c.LabelSelector == nil || !selects(t, c.LabelSelector.MatchLabels) {
			t.Errorf("topologySpreadConstraint %+v: want ScheduleAnyway, selecting the webhook pods", c)
		}
	}
}

func selects(t *testing.T, sel map[string]string) bool {
	t.Helper()
	return len(sel) > 0 && labels.SelectorFromSet(sel).Matches(podLabels)
}

// checkPodSecurity: non-root, RuntimeDefault seccomp, and every container
// (sidecars included) read-only, unprivileged, with resources.
func checkPodSecurity(t *testing.T, pod corev1.PodSpec) {
	t.Helper()
	sc := pod.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != 65532 ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext = %+v, want runAsNonRoot, runAsUser 65532, seccomp RuntimeDefault", sc)
	}
	for _, c := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
		csc := c.SecurityContext
		if csc == nil || csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem ||
			csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation ||
			csc.Capabilities == nil || !slices.Equal(csc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(csc.Capabilities.Add) > 0 {
			t.Errorf("container %s securityContext = %+v, want readOnlyRootFilesystem, no privilege escalation, drop ALL", c.Name, csc)
		}
		if csc != nil && (csc.Privileged != nil && *csc.Privileged || csc.RunAsUser != nil && *csc.RunAsUser == 0) {
			t.Errorf("container %s runs privileged or as root", c.Name)
		}
		r := c.Resources
		if r.Requests.Cpu().IsZero() || r.Requests.Memory().IsZero() || r.Limits.Memory().IsZero() {
			t.Errorf("container %s resources = %+v, want cpu and memory requests and a memory limit", c.Name, r)
		}
	}
}

// checkVolumeMounts: every mount names a volume of the pod (a patch that
// adds one without the other fails here, not at pod creation).
func checkVolumeMounts(t *testing.T, pod corev1.PodSpec) {
	t.Helper()
	vols := map[string]bool{}
	for _, v := range pod.Volumes {
		vols[v.Name] = true
	}
	for _, c := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
		for _, m := range c.VolumeMounts {
			if !vols[m.Name] {
				t.Errorf("container %s mounts volume %q, which the pod lacks", c.Name, m.Name)
			}
		}
	}
}

func checkWebhookContainer(t *testing.T, pod corev1.PodSpec, c corev1.Container, policiesArg string) {
	t.Helper()
	if c.Image != image || !slices.Equal(c.Command, []string{"/gpuadmit-webhook"}) {
		t.Errorf("webhook runs %v from %s, want /gpuadmit-webhook from %s", c.Command, c.Image, image)
	}
	wantRes := corev1.ResourceRequirements{
		// docs/scale.md's formula at 1,000 GPU nodes and 20,000 GPU pods.
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("384Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("544Mi")},
	}
	if !cmp.Equal(c.Resources, wantRes, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })) {
		t.Errorf("webhook resources = %+v, want %+v", c.Resources, wantRes)
	}
	checkArgs(t, c.Args, policiesArg)
	checkEnv(t, c)
	checkProbes(t, c)
	tls := mount(t, pod, c, "/tls")
	if tls.Secret == nil || tls.Secret.SecretName == "" {
		t.Errorf("/tls is %+v, want a Secret volume", tls)
	}
	checkRecordKeyMount(t, pod, c)
	if tmp := mount(t, pod, c, "/tmp"); tmp.EmptyDir == nil {
		t.Errorf("/tmp is %+v, want an emptyDir", tmp)
	}
	for _, m := range c.VolumeMounts {
		if m.MountPath != "/tmp" && !m.ReadOnly {
			t.Errorf("webhook mounts %s read-write; only /tmp may be", m.MountPath)
		}
	}
}

// checkRecordKeyMount: the record keys come from the Secret
// gpuadmit-record-key, mounted optional (the webhook runs without it, sealing
// nothing) where --record-key-dir reads them.
func checkRecordKeyMount(t *testing.T, pod corev1.PodSpec, c corev1.Container) {
	t.Helper()
	if !slices.Contains(c.Args, "--record-key-dir=/record-key") {
		t.Errorf("webhook args %q lack --record-key-dir=/record-key", c.Args)
	}
	v := mount(t, pod, c, "/record-key")
	if s := v.Secret; s == nil || s.SecretName != recordKeySecret || s.Optional == nil || !*s.Optional {
		t.Errorf("/record-key is %+v, want the Secret %s, optional", v, recordKeySecret)
	}
}

// checkNoRecordKey: no rendering but the dev overlay ships a record key (one
// in a public manifest would seal nothing).
func checkNoRecordKey(t *testing.T, objs objects) {
	t.Helper()
	if _, ok := objs[key{"Secret", namespace, recordKeySecret}]; ok {
		t.Errorf("Secret %s rendered: its key would be public", recordKeySecret)
	}
}

// checkDevRecordKey: the dev overlay's record key is the one `gpuadmit
// certs` generated, 32 random bytes in hex.
func checkDevRecordKey(dir string) func(*testing.T, objects) {
	return func(t *testing.T, objs objects) {
		t.Helper()
		want, err := os.ReadFile(filepath.Join(dir, "certs", certs.RecordKeyFile))
		if err != nil {
			t.Fatal(err)
		}
		s := get[*corev1.Secret](t, objs, "Secret", namespace, recordKeySecret)
		if got := string(s.Data["current"]); got != string(want) || len(got) != 64 {
			t.Errorf("Secret %s current = %q, want the generated 64 hex digits %q", recordKeySecret, got, want)
		}
	}
}

// checkArgs: the flags the binary needs, and --policies exactly as the variant sets it.
func checkArgs(t *testing.T, args []string, policiesArg string) {
	t.Helper()
	for _, want := range []string{
		"--cert-dir=/tls", "--port=9443", "--health-probe-bind-address=:8081", "--metrics-bind-address=:8080",
	} {
		if !slices.Contains(args, want) {
			t.Errorf("webhook args %q lack %s", args, want)
		}
	}
	var got []string
	for _, a := range args {
		if strings.HasPrefix(a, "--policies") {
			got = append(got, a)
		}
	}
	var want []string
	if policiesArg != "" {
		want = []string{policiesArg}
	}
	if !slices.Equal(got, want) {
		t.Errorf("webhook --policies args = %q, want %q", got, want)
	}
}

func checkEnv(t *testing.T, c corev1.Container) {
	t.Helper()
	want := map[string]string{"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && want[e.Name] == e.ValueFrom.FieldRef.FieldPath {
			delete(want, e.Name)
		}
	}
	if len(want) > 0 {
		t.Errorf("webhook env lacks %v from the downward API", want)
	}
	// The Go runtime's memory cap comes from the container's limit (cmd/webhook).
	var limit bool
	for _, e := range c.Env {
		limit = limit || e.Name == "GPUADMIT_MEMORY_LIMIT" && e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil &&
			e.ValueFrom.ResourceFieldRef.Resource == "limits.memory"
	}
	if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok || !limit {
		t.Errorf("webhook: memory limit set %v, GPUADMIT_MEMORY_LIMIT from limits.memory %v; want both", ok, limit)
	}
}

// checkProbes: readiness and liveness on the health port, and a preStop
// sleep so endpoints drain before the server stops.
func checkProbes(t *testing.T, c corev1.Container) {
	t.Helper()
	for path, p := range map[string]*corev1.Probe{"/readyz": c.ReadinessProbe, "/healthz": c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || port(t, c, p.HTTPGet.Port.String()) != 8081 {
			t.Errorf("probe for %s = %+v, want HTTP GET %s on 8081", path, p, path)
		}
	}
	if l := c.Lifecycle; l == nil || l.PreStop == nil || l.PreStop.Sleep == nil || l.PreStop.Sleep.Seconds != 5 {
		t.Errorf("lifecycle = %+v, want preStop sleep 5s", l)
	}
}

// port resolves a probe's port, by number or by the container port's name.
func port(t *testing.T, c corev1.Container, p string) int32 {
	t.Helper()
	for _, cp := range c.Ports {
		if cp.Name == p || strings.TrimSpace(p) == itoa(cp.ContainerPort) {
			return cp.ContainerPort
		}
	}
	return -1
}

func checkService(t *testing.T, objs objects) {
	t.Helper()
	s := get[*corev1.Service](t, objs, "Service", namespace, serviceName)
	if !labels.Equals(s.Spec.Selector, podLabels) {
		t.Errorf("Service selector = %v, want %v", s.Spec.Selector, podLabels)
	}
	got := map[string]string{}
	for _, p := range s.Spec.Ports {
		got[p.Name] = itoa(p.Port) + "->" + p.TargetPort.String()
	}
	if want := map[string]string{"https": "443->9443", "metrics": "8080->8080"}; !cmp.Equal(got, want) {
		t.Errorf("Service ports = %v, want %v", got, want)
	}
}

func checkPDB(t *testing.T, objs objects) {
	t.Helper()
	p := get[*policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget", namespace, "gpuadmit-webhook")
	if p.Spec.MaxUnavailable == nil || p.Spec.MaxUnavailable.String() != "1" || p.Spec.MinAvailable != nil {
		t.Errorf("PDB maxUnavailable = %v, minAvailable = %v, want maxUnavailable 1", p.Spec.MaxUnavailable, p.Spec.MinAvailable)
	}
	if p.Spec.Selector == nil || !selects(t, p.Spec.Selector.MatchLabels) {
		t.Errorf("PDB selector %v does not select the webhook pods", p.Spec.Selector)
	}
}

// checkPriorityClasses: the classes policies/data.yaml names, none the cluster default.
func checkPriorityClasses(t *testing.T, objs objects) {
	t.Helper()
	never := corev1.PreemptNever
	want := map[string]struct {
		value int32
		never bool
	}{"gpuadmit-training": {1000, false}, "gpuadmit-inference": {10000, false}, "gpuadmit-batch": {100, true}}
	for name, w := range want {
		pc := get[*schedulingv1.PriorityClass](t, objs, "PriorityClass", "", name)
		isNever := pc.PreemptionPolicy != nil && *pc.PreemptionPolicy == never
		if pc.Value != w.value || pc.GlobalDefault || isNever != w.never || pc.Description == "" {
			t.Errorf("PriorityClass %s = value %d, globalDefault %v, preemption %s, description %q; want value %d, not default, preemption Never %v, a description",
				name, pc.Value, pc.GlobalDefault, show(pc.PreemptionPolicy), pc.Description, w.value, w.never)
		}
	}
}

func container(t *testing.T, cs []corev1.Container, name string) corev1.Container {
	t.Helper()
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %q", name)
	return corev1.Container{}
}

// mount returns the volume c mounts at path.
func mount(t *testing.T, pod corev1.PodSpec, c corev1.Container, path string) corev1.Volume {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if m.MountPath != path {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name == m.Name {
				return v
			}
		}
	}
	t.Fatalf("container %s mounts no volume at %s", c.Name, path)
	return corev1.Volume{}
}

func deployment(t *testing.T, objs objects) corev1.PodSpec {
	t.Helper()
	return get[*appsv1.Deployment](t, objs, "Deployment", namespace, "gpuadmit-webhook").Spec.Template.Spec
}
