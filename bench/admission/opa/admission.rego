# METADATA
# title: gpuadmit's default decision, as OPA answers it for the benchmark
# description: |
#   OPA as the mutating admission webhook, the kube-mgmt way: the API server
#   POSTs the AdmissionReview to /v0/data/gpuadmit/admission/review (the v0
#   data API takes the body as input and answers the rule's value unwrapped)
#   and this rule returns the AdmissionReview with a JSON patch. What the
#   cluster has is pushed into data.cluster (pools, namespaces), as kube-mgmt
#   replicates objects into data.kubernetes.
#
#   It makes gpuadmit's default decision (policies/) for the dialects the
#   benchmark's pods use: gpuadmit.io/gpu-memory, nvidia.com/gpu, and HAMi's
#   nvidia.com/gpu + nvidia.com/gpumem, one GPU container per pod, the
#   gpuadmit.io/class and gpuadmit.io/backend hints. The pool is the first,
#   backend by backend (mig, shared, whole), with the least GPU memory that
#   still covers the request and a node with the resource free; the patch
#   sets the same resources, nodeSelector, tolerations, priorityClassName and
#   gpuadmit.io/ annotations as gpuadmit's. A pod that already carries
#   gpuadmit.io/decision (the API server reinvoking the webhook) is admitted
#   unchanged.
package gpuadmit.admission

pod := input.request.object

# review is the AdmissionReview the API server reads.
review := {
	"apiVersion": "admission.k8s.io/v1",
	"kind": "AdmissionReview",
	"response": object.union({"uid": input.request.uid}, response),
}

response := {"allowed": false, "status": {"code": 403, "message": deny_message}} if {
	deny_message
} else := {"allowed": true, "patchType": "JSONPatch", "patch": base64.encode(json.marshal(patch))} if {
	count(patch) > 0
} else := {"allowed": true}

decided if pod.metadata.annotations["gpuadmit.io/decision"]

# gpu is the GPU container (index, container, what it asks for), where there is one to decide for.
gpu := {"index": i, "container": c, "ask": ask(c)} if {
	input.request.operation == "CREATE"
	not decided
	some i, c in pod.spec.containers
	ask(c)
}

limits(c) := object.get(c, ["resources", "limits"], {})

requests(c) := object.get(c, ["resources", "requests"], {})

gpu_prefixes := ["nvidia.com/gpu", "nvidia.com/mig-", "gpuadmit.io/", "aliyun.com/gpu-mem", "volcano.sh/vgpu"]

gpu_key(k) if startswith(k, gpu_prefixes[_])

mib(q) := ceil(units.parse(q) / 1048576)

# ask reads the container's request: form (memory or whole), GPU count and MiB per GPU.
ask(c) := {"form": "memory", "count": 1, "memoryMiB": mib(l["gpuadmit.io/gpu-memory"]), "dialect": "native"} if {
	l := limits(c)
	l["gpuadmit.io/gpu-memory"]
	not l["nvidia.com/gpu"]
}

ask(c) := {"form": "memory", "count": units.parse(l["nvidia.com/gpu"]), "memoryMiB": units.parse(l["nvidia.com/gpumem"]), "dialect": "hami"} if {
	l := limits(c)
	l["nvidia.com/gpumem"]
}

ask(c) := {"form": "whole", "count": units.parse(l["nvidia.com/gpu"]), "memoryMiB": 0, "dialect": "nvidia"} if {
	l := limits(c)
	l["nvidia.com/gpu"]
	not l["nvidia.com/gpumem"]
}

hints := {
	"class": object.get(pod.metadata, ["labels", "gpuadmit.io/class"], object.get(pod.metadata, ["annotations", "gpuadmit.io/class"], "")),
	"backend": object.get(pod.metadata, ["annotations", "gpuadmit.io/backend"], ""),
}

namespace_labels := labels if {
	labels := data.cluster.namespaces[input.request.namespace].labels
	is_object(labels)
} else := {}

pod_class := hints.class if hints.class != ""

else := object.get(namespace_labels, "gpuadmit.io/class", "")

priority_class_name := object.get(
	namespace_labels,
	concat("", ["gpuadmit.io/priority.", pod_class]),
	data.cluster.priorityClasses[pod_class],
) if pod_class != ""

else := ""

backends := [hints.backend] if hints.backend != ""

else := ["whole"] if gpu.ask.form == "whole"

else := ["mig", "shared", "whole"]

modes := {"mig": {"mig-mixed", "mig-single"}, "shared": {"shared"}, "whole": {"whole"}}

# candidates are the pools that can take the request, in order of preference.
candidates := [cand |
	some backend in backends
	ranked := sort([[rank(backend, p), p.name, p] |
		some p in data.cluster.pools
		p.mode in modes[backend]
	])
	some r in ranked
	cand := fit(backend, r[2])
	node_fits(r[2], cand.resource, cand.quantity)
]

rank("mig", p) := min([pr.memoryMiB | some pr in p.profiles; pr.memoryMiB >= gpu.ask.memoryMiB]) if {
	gpu.ask.form == "memory"
} else := 1e15

rank(backend, p) := p.gpuMemoryMiB if backend != "mig"

# fit sizes the request on a pool: the smallest MIG slice that covers it, a
# memory share in whole units of one GPU, or whole GPUs.
fit("mig", p) := {"pool": p, "backend": "mig", "resource": pr.resource, "quantity": gpu.ask.count, "profile": pr.name, "mib": pr.memoryMiB * gpu.ask.count} if {
	gpu.ask.form == "memory"
	fitting := sort([[pr.memoryMiB, pr.computeSlices, pr.memorySlices, pr.name] |
		some pr in p.profiles
		pr.memoryMiB >= gpu.ask.memoryMiB
	])
	some pr in p.profiles
	pr.name == fitting[0][3]
}

fit("shared", p) := {"pool": p, "backend": "shared", "resource": p.resource, "quantity": share, "profile": "", "mib": share * p.shareUnitMiB} if {
	gpu.ask.form == "memory"
	gpu.ask.count == 1
	share := ceil(gpu.ask.memoryMiB / p.shareUnitMiB)
	share <= floor(p.gpuMemoryMiB / p.shareUnitMiB)
}

fit("whole", p) := {"pool": p, "backend": "whole", "resource": p.resource, "quantity": gpu.ask.count, "profile": "", "mib": p.gpuMemoryMiB * gpu.ask.count} if {
	p.gpuMemoryMiB >= gpu.ask.memoryMiB
	gpu.ask.count <= p.gpusPerNode
}

node_fits(p, resource, quantity) if {
	some n in p.nodes
	n.allocatable[resource] >= quantity
}

choice := candidates[0]

deny_message := sprintf("no GPU pool can serve container %q (%s)", [gpu.container.name, json.marshal(gpu.ask)]) if {
	gpu
	count(candidates) == 0
}

tolerations := [t |
	some taint in choice.pool.taints
	t := {"key": taint.key, "operator": "Equal", "value": object.get(taint, "value", ""), "effect": taint.effect}
	not t in object.get(pod.spec, "tolerations", [])
]

# The GPU resource, and the accounting resources gpuadmit always adds (real
# MiB given, in total and per model) so that ResourceQuota counts them.
gpu_resources(list) := object.union(
	{k: v | some k, v in list; not gpu_key(k)},
	{
		choice.resource: format_int(choice.quantity, 10),
		"gpuadmit.io/gpu-memory-mib": format_int(choice.mib, 10),
		choice.pool.modelResource: format_int(choice.mib, 10),
	},
)

given := sprintf("%s=%d (MIG %s)", [choice.resource, choice.quantity, choice.profile]) if choice.profile != ""

else := sprintf("%s=%d", [choice.resource, choice.quantity])

# accepted_models is what gpuadmit writes on a pod placed on one pool
# (gpuadmit.io/accepted-models): the GPU models of the candidates' pools,
# sorted, for its pick of one pool by expected demand.
accepted_models := concat(",", sort({c.pool.model | some c in candidates}))

annotations := {
	"gpuadmit.io/accepted-models": accepted_models,
	"gpuadmit.io/decision": sprintf("%s: %s -> %s [opa/%s-to-%s]; pool %s", [gpu.container.name, gpu.ask.dialect, given, gpu.ask.form, choice.backend, choice.pool.name]),
	"gpuadmit.io/request": json.marshal({gpu.container.name: {
		"limits": {k: v | some k, v in limits(gpu.container); gpu_key(k)},
		"requests": {k: v | some k, v in requests(gpu.container); gpu_key(k)},
	}}),
}

# patch is the JSON patch; empty when there is nothing to decide.
patch := array.concat(annotation_ops, array.concat(spec_ops, priority_ops)) if choice

else := []

annotation_ops := [{"op": "add", "path": "/metadata/annotations", "value": annotations}] if {
	not pod.metadata.annotations
} else := [{"op": "add", "path": concat("", ["/metadata/annotations/", replace(k, "/", "~1")]), "value": v} |
	some k, v in annotations
]

spec_ops := [
	{"op": "add", "path": sprintf("/spec/containers/%d/resources", [gpu.index]), "value": object.union(object.remove(gpu.container.resources, ["limits", "requests"]), {
		"limits": gpu_resources(limits(gpu.container)),
		"requests": gpu_resources(requests(gpu.container)),
	})},
	{"op": "add", "path": "/spec/nodeSelector", "value": object.union(object.get(pod.spec, "nodeSelector", {}), choice.pool.nodeSelector)},
	{"op": "add", "path": "/spec/tolerations", "value": array.concat(object.get(pod.spec, "tolerations", []), tolerations)},
]

# priority_ops set the class's PriorityClass with the priority and
# preemptionPolicy the API server's Priority plugin computes from it (from
# the replicated PriorityClasses), so that the plugin, run again after the
# webhook, changes nothing and the API server calls the webhook only once.
priority_ops := array.concat(
	[{"op": "add", "path": "/spec/priorityClassName", "value": priority_class_name}],
	resolved_priority_ops,
) if {
	priority_class_name != ""
	object.get(pod.spec, "priorityClassName", "") != priority_class_name
} else := []

resolved_priority_ops := [
	{"op": "add", "path": "/spec/priority", "value": class.value},
	{"op": "add", "path": "/spec/preemptionPolicy", "value": class.preemptionPolicy},
] if {
	class := data.cluster.priorityClassValues[priority_class_name]
} else := [{"op": "remove", "path": concat("", ["/spec/", f])} | some f in ["priority", "preemptionPolicy"]; pod.spec[f]]
