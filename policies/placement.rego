# Placement: where each GPU container may go, in order of preference. gpuadmit takes the
# first candidate that the inventory can serve and that fits, so this is a
# fallback chain: a memory or fraction request goes to the smallest fitting
# MIG slice where a MIG pool can serve it, else a memory share, else (where
# the data allows) a time-sliced replica, else whole GPUs; nvidia.com/gpu: N
# stays whole, else takes N replicas of a time-sliced pool; a request already written as a MIG
# slice or a memory share stays in that form. The pod hints
# gpuadmit.io/backend and gpuadmit.io/model narrow the choice; a container's
# nvidia.com/gpu.shared: N arrives as backend "time-sliced" (pkg/intent sets
# it for the pod), so the pod takes replicas only.
package gpuadmit

placement[c.name] := candidates(c) if some c in input.containers

# candidates lists pools backend by backend, the best pool of each backend
# first, after the MIG-single pools the pod's own nodeSelector picks.
candidates(c) := array.concat(selected_slices(c), [cand |
	some backend in backends(c)
	some cand in pool_candidates(c, backend)
])

# NVIDIA's MIG single strategy serves a pool's one slice as nvidia.com/gpu,
# and its users select the pool by product (nvidia.com/gpu.product:
# NVIDIA-A100-SXM4-40GB-MIG-1g.5gb). A whole-GPU request whose nodeSelector
# picks such a pool asks for that many of its slices.
selected_slices(c) := [{
	"pool": p.name,
	"backend": "mig",
	"profile": p.profiles[0].name,
	"rule": "default/whole-on-selected-mig-single",
	"tolerations": tolerations(p),
	"schedulerName": pool_owner(p),
} |
	c.form == "whole"
	input.hints.backend in {"", "mig"}
	not several_slices_denied(c)
	some p in input.pools
	p.mode == "mig-single"
	count(p.profiles) == 1
	pod_selects(p)
	model_allowed(p)
]

# pod_selects: the pod's nodeSelector names the pool by one of its labels and
# contradicts none.
pod_selects(p) if {
	sel := object.get(object.get(input.pod, "spec", {}), "nodeSelector", {})
	some k, v in p.nodeSelector
	sel[k] == v
	every k2, v2 in p.nodeSelector {
		object.get(sel, k2, v2) == v2
	}
}

backends(_) := [input.hints.backend] if input.hints.backend != ""

backends(c) := ["mig"] if {
	input.hints.backend == ""
	c.form == "profile"
}

backends(c) := ["shared"] if {
	input.hints.backend == ""
	c.dialect == "share"
}

# nvidia.com/gpu: N asks for N replicas on a time-sliced pool, as NVIDIA's
# device plugin serves it there; whole GPUs come first.
backends(c) := ["whole", "time-sliced"] if {
	input.hints.backend == ""
	c.form == "whole"
}

backends(c) := array.concat(array.concat(["mig", "shared"], memory_on_time_sliced), ["whole"]) if {
	input.hints.backend == ""
	c.dialect != "share"
	c.form in {"memory", "fraction"}
	c.count == 1
}

# memory_on_time_sliced: data.gpuadmit.config.memoryOnTimeSlicedGPUs is
# "warn", so a request sized in memory may get a time-sliced replica, whose
# memory is not isolated (gpuadmit warns); "never" keeps it off them.
memory_on_time_sliced := ["time-sliced"] if replicas_for_memory

else := []

replicas_for_memory if data.gpuadmit.config.memoryOnTimeSlicedGPUs == "warn"

# replicas_denied: under "never", a request sized in memory or as a fraction
# gets no replica even where gpuadmit.io/backend (or nvidia.com/gpu.shared
# beside it in the pod) asks for time-sliced GPUs: the hints narrow the
# policy's choice and never widen it, as severalMIGSlicesPerContainer: deny
# holds against gpuadmit.io/backend: mig. Such a pod is denied (decision.rego)
# with what to write instead.
replicas_denied(c, "time-sliced") if {
	c.form in {"memory", "fraction"}
	not replicas_for_memory
}

# Several GPUs in one container prefer whole GPUs: a CUDA process sees one
# MIG device, so several slices serve only a container that runs a process
# per slice (gpuadmit warns when it gives them).
backends(c) := array.concat(["whole", "mig", "shared"], memory_on_time_sliced) if {
	input.hints.backend == ""
	c.dialect != "share"
	c.form in {"memory", "fraction"}
	c.count > 1
}

pool_modes := {
	"mig": {"mig-mixed", "mig-single"},
	"shared": {"shared"},
	"whole": {"whole"},
	"time-sliced": {"time-sliced"},
}

# several_slices_denied: data.gpuadmit.config.severalMIGSlicesPerContainer
# is "deny", so a container asking for more than one GPU gets no MIG slices.
several_slices_denied(c) if {
	c.count > 1
	data.gpuadmit.config.severalMIGSlicesPerContainer == "deny"
}

mig_denied(c, "mig") if several_slices_denied(c)

pool_candidates(c, backend) := [{
	"pool": ranked[1],
	"backend": backend,
	"rule": rule,
	"tolerations": tolerations(ranked[2]),
	"schedulerName": pool_owners[ranked[1]],
} |
	not mig_denied(c, backend)
	not replicas_denied(c, backend)
	rule := sprintf("default/%s-to-%s", [c.form, backend])

	# Pool names are unique, so the pool itself never decides the order.
	some ranked in sort([[rank(c, backend, p), p.name, p] |
		some p in usable_pools
		serves(p, backend)
	])
]

# A pool whose per-model quota cannot hold the request goes after the pools
# that can: the policy falls back to a model the namespace still has room on.
rank(c, backend, p) := [over_model_quota(c, p), fit_rank(c, backend, p)]

serves(p, backend) if p.mode in pool_modes[backend]

# A GPU pool of gpuadmit's DRA driver also serves shares, as resource claims
# the scheduler fits on one GPU, where its GPUs can be shared.
serves(p, "shared") if {
	object.get(p, "dra", false)
	p.mode == "whole"
	object.get(p, "shareUnitMiB", 0) > 0
}

# model_allowed: the pool's GPUs are of the model gpuadmit.io/model names, and
# of a type HAMi's nvidia.com/use-gputype lists and nouse-gputype does not,
# and the pod's own scheduler, where it keeps one, may use the pool.
model_allowed(_) if unconstrained

model_allowed(p) if {
	not unconstrained
	model_hint_allows(p)
	type_allowed(p)
	scheduler_allows(p)
}

# unconstrained: the pod names no model, no GPU types and no scheduler of
# its own, so every pool is allowed (decided once, not per pool).
unconstrained if {
	input.hints.model == ""
	count(use_types) == 0
	count(avoid_types) == 0
	pod_scheduler == ""
}

# usable_pools are the pools model_allowed lets the pod use, once per decision.
usable_pools := [p | some p in input.pools; model_allowed(p)]

model_hint_allows(_) if input.hints.model == ""

model_hint_allows(p) if lower(p.model) == lower(input.hints.model)

# use_types and avoid_types are the hint lists, empty when absent or null.
use_types := input.hints.useTypes if is_array(input.hints.useTypes)

else := []

avoid_types := input.hints.avoidTypes if is_array(input.hints.avoidTypes)

else := []

type_allowed(p) if {
	type_used(p)
	not type_listed(p, avoid_types)
}

type_used(_) if count(use_types) == 0

type_used(p) if type_listed(p, use_types)

# type_listed: as HAMi matches types, a listed type is part of the GPU's name,
# here the pool's model or product, ignoring case.
type_listed(p, types) if {
	some t in types
	some name in [p.model, object.get(p, "product", "")]
	contains(upper(name), upper(t))
}

# rank orders pools of one backend: the least GPU memory that still covers the
# request first, so the big GPUs stay free for the requests that need them.
fit_rank(c, "mig", p) := min(fits) if {
	fits := profile_fits(c, p)
	count(fits) > 0
} else := 1e15

# profile_fits are the memory sizes of the pool's profiles that cover the
# request: as much memory; as large a share of the GPU's memory slices as
# the fraction; the profile named; every slice of the GPU (a whole GPU
# through MIG). One comprehension per form, so no rule is called per profile.
profile_fits(c, p) := [pr.memoryMiB | some pr in p.profiles; pr.memoryMiB >= c.memoryMiB] if c.form == "memory"

profile_fits(c, p) := [pr.memoryMiB |
	some pr in p.profiles
	pr.memorySlices * 1000 >= c.fractionMilli * p.memorySlices
] if c.form == "fraction"

profile_fits(c, p) := [pr.memoryMiB | some pr in p.profiles; pr.name == c.profile] if c.form == "profile"

profile_fits(c, p) := [pr.memoryMiB | some pr in p.profiles; pr.memorySlices == p.memorySlices] if c.form == "whole"

fit_rank(_, "whole", p) := p.gpuMemoryMiB

fit_rank(_, "time-sliced", p) := p.gpuMemoryMiB

# A share pool of gpuadmit's agent serves one share size (sharesPerGPU
# shares of shareUnitMiB per GPU): the smallest share that covers the
# request first, and pools whose share is too small last (gpuadmit skips them).
fit_rank(_, "shared", p) := p.gpuMemoryMiB if object.get(p, "sharesPerGPU", 0) == 0

fit_rank(c, "shared", p) := p.shareUnitMiB if {
	p.sharesPerGPU > 0
	share_covers(c, p)
}

fit_rank(c, "shared", p) := 1e15 if {
	p.sharesPerGPU > 0
	not share_covers(c, p)
}

share_covers(c, p) if {
	c.form == "memory"
	p.shareUnitMiB >= c.memoryMiB
}

# A fraction is of the GPU, and a share is 1/sharesPerGPU of it.
share_covers(c, p) if {
	c.form == "fraction"
	c.fractionMilli * p.sharesPerGPU <= 1000
}

over_model_quota(c, p) if {
	hard := input.quota.hard[p.modelResource]
	hard - object.get(input.quota.used, p.modelResource, 0) < c.memoryMiB * c.count
} else := false

# tolerations let the pod onto the chosen pool's tainted nodes.
tolerations(p) := [{
	"key": t.key,
	"operator": "Equal",
	"value": object.get(t, "value", ""),
	"effect": t.effect,
} |
	some t in p.taints
]
