# METADATA
# title: gpuadmit decision
# description: |
#   The document gpuadmit evaluates, data.gpuadmit.decision, and the pod-level
#   rules: the class → PriorityClass map, the model hint, foreign
#   schedulers, and warnings.
package gpuadmit

decision := {
	"deny": deny_unless_passed,
	"pass": passed,
	"migrateFrom": migrate_from,
	"warnings": warnings,
	"placement": placement,
	"priorityClassName": priority_class_name,
	"nodeSelector": {},
	"tolerations": [],
	"labels": {},
	"annotations": {},
}

priority_label_prefix := "gpuadmit.io/priority."

# pod_class is the pod's gpuadmit.io/class, else its namespace's default class.
pod_class := input.hints.class if input.hints.class != ""

else := object.get(input.namespace.labels, "gpuadmit.io/class", "")

known_classes contains class if some class, _ in data.gpuadmit.config.priorityClasses

known_classes contains substring(key, count(priority_label_prefix), -1) if {
	some key, _ in input.namespace.labels
	startswith(key, priority_label_prefix)
}

# priority_class_name maps the class, letting the namespace override the map.
priority_class_name := name if {
	pod_class != ""
	name := object.get(
		input.namespace.labels,
		concat("", [priority_label_prefix, pod_class]),
		data.gpuadmit.config.priorityClasses[pod_class],
	)
} else := ""

deny contains msg if {
	pod_class != ""
	not pod_class in known_classes
	msg := sprintf("gpuadmit.io/class %q is not a class of this cluster; accepted: %s", [pod_class, concat(", ", sort(known_classes))])
}

deny contains msg if {
	priority_class_name != ""
	asked := object.get(input.pod.spec, "priorityClassName", "")
	asked != ""
	asked != priority_class_name
	msg := sprintf("spec.priorityClassName %q conflicts with class %q, which runs as %q; remove spec.priorityClassName or change gpuadmit.io/class", [asked, pod_class, priority_class_name])
}

deny contains msg if {
	input.hints.model != ""
	count([p | some p in input.pools; model_hint_allows(p)]) == 0
	msg := sprintf("gpuadmit.io/model %q: no GPU pool of this cluster has that model; %s", [input.hints.model, pool_models])
}

# pool_models lists the models of the cluster's pools for a denial, and says
# so when there is none rather than ending the message with an empty list.
pool_models := "the cluster has no GPU pools" if count(input.pools) == 0

pool_models := sprintf("models: %s", [concat(", ", sort({p.model | some p in input.pools}))]) if count(input.pools) > 0

pool_products := "the cluster has no GPU pools" if count(input.pools) == 0

pool_products := sprintf("pools: %s", [concat("; ", sort([sprintf("%s (model %s, product %s)", [p.name, p.model, object.get(p, "product", "")]) | some p in input.pools]))]) if count(input.pools) > 0

# A pod whose nvidia.com/use-gputype or nouse-gputype leaves no pool is
# denied with each pool's model and product, so the author sees what to list.
deny contains msg if {
	count(use_types) + count(avoid_types) > 0
	count([p | some p in input.pools; type_allowed(p)]) == 0
	msg := sprintf("nvidia.com/use-gputype %q and nouse-gputype %q: no GPU pool of this cluster has a GPU of those types; %s", [concat(",", use_types), concat(",", avoid_types), pool_products])
}

deny contains msg if {
	some c in input.containers
	c.form == "profile"
	several_slices_denied(c)
	msg := sprintf("container %q asks for %d MIG %s slices, and this cluster's policy gives a container at most one MIG slice (a CUDA process sees one MIG device); ask for 1, or for whole GPUs (nvidia.com/gpu)", [c.name, c.count, c.profile])
}

# A pod sent to time-sliced GPUs (by gpuadmit.io/backend, or by a container's
# nvidia.com/gpu.shared) is denied where a container sized in memory or as a
# fraction may not take a replica (memoryOnTimeSlicedGPUs: never), with what
# sent it there and what to write instead.
deny contains msg if {
	input.hints.backend == "time-sliced"
	some c in input.containers
	replicas_denied(c, "time-sliced")
	msg := sprintf("container %q asks for GPU sized in memory or as a fraction (%s), and %s; this cluster's policy (memoryOnTimeSlicedGPUs: never) gives time-sliced replicas only to requests for whole GPUs, since a replica's memory is shared with the GPU's other replicas and never isolated; for replicas, ask for nvidia.com/gpu.shared: N or nvidia.com/gpu: N instead; for isolated memory (a MIG slice, a memory share or a whole GPU), %s", [c.name, concat(", ", c.source), time_sliced_by.why, time_sliced_by.fix])
}

# time_sliced_by says what sent the pod to time-sliced GPUs, and how to undo
# it: the annotation gpuadmit.io/backend, else a container's
# nvidia.com/gpu.shared (pkg/intent sets the backend hint for it, since a
# pod's containers share one pool).
time_sliced_by := {
	"why": sprintf("container %q asks for nvidia.com/gpu.shared, which puts the whole pod on a time-sliced pool", [shared[0]]),
	"fix": "ask for it in a pod without nvidia.com/gpu.shared",
} if {
	object.get(input.pod, ["metadata", "annotations", "gpuadmit.io/backend"], "") != "time-sliced"
	shared := [c.name | some c in input.containers; c.dialect == "nvidia-shared"]
	count(shared) > 0
} else := {"why": "gpuadmit.io/backend is \"time-sliced\"", "fix": "remove gpuadmit.io/backend"}

warnings contains msg if {
	some c in input.containers
	c.coresPercent > 0
	msg := sprintf("container %q: a compute share of %d%% is not enforced on MIG slices, memory shares or whole GPUs; it is ignored", [c.name, c.coresPercent])
}

# pod_scheduler is the scheduler the pod's author named. The API server
# writes default-scheduler into every pod that names none before admission,
# so that name counts as unset.
pod_scheduler := s if {
	s := object.get(object.get(input.pod, "spec", {}), "schedulerName", "")
	s != "default-scheduler"
} else := ""

scheduler_config := object.get(data.gpuadmit.config, "schedulers", {})

# passed: the pod's scheduler coexists with gpuadmit, which leaves its pods
# unchanged and denies none of them.
passed if {
	pod_scheduler != ""
	pod_scheduler in object.get(scheduler_config, "coexist", [])
} else := false

deny_unless_passed := set() if passed

else := deny

# migrate_from names the scheduler gpuadmit takes the pod over from: the
# pod gets its pool's owner instead, and loses that scheduler's annotations.
migrate_from := pod_scheduler if {
	not passed
	pod_scheduler in object.get(scheduler_config, "migrate", [])
} else := ""

# pool_owner is the scheduler that owns the pool: the one the data's owners
# name, else default_owner; but gpuadmit-scheduler only where gpuadmit's
# controller records that it may own the pool now
# (input.cluster.owners[pool] == "gpuadmit-scheduler"), else the stock
# scheduler, default-scheduler. The controller moves a pool between the two
# only once no pod of the old owner waits on it, so two schedulers never
# hold pending pods of one pool; when gpuadmit-scheduler's Lease expires it
# replaces the pods that waited for it (pkg/handover).
pool_owner(p) := o if {
	o := pool_owners[p.name]
} else := owner_now(p.name)

# pool_owners maps every pool to its owner, once per decision.
pool_owners := {p.name: owner_now(p.name) | some p in input.pools}

owner_now(name) := "default-scheduler" if {
	wanted_owner(name) == "gpuadmit-scheduler"
	object.get(object.get(object.get(input, "cluster", {}), "owners", {}), name, "") != "gpuadmit-scheduler"
} else := wanted_owner(name)

# wanted_owner is the owner the data gives the pool.
wanted_owner(name) := object.get(named_owners, name, default_owner)

# named_owners are the data's owners: pool name → scheduler.
named_owners := object.get(scheduler_config, "owners", {})

# default_owner owns the pools the data's owners do not name: the data's
# defaultOwner; else gpuadmit-scheduler, so that its placement score packs
# the GPUs, on the pools gpuadmit's controller lets it own (its leader
# renews its Lease, and no stock scheduler's pod waits there); the others
# go to the stock scheduler, default-scheduler. When every
# gpuadmit-scheduler replica is gone, new GPU pods go to the stock
# scheduler instead of waiting for one that does not come, and the pods
# that waited for it are replaced.
default_owner := o if {
	o := scheduler_config.defaultOwner
	o != ""
} else := "gpuadmit-scheduler"

# scheduler_allows: a pod that keeps its scheduler goes only to pools that
# scheduler owns or that are default-scheduler's; two schedulers never share
# a pool. A pod that names gpuadmit-scheduler goes only to the pools it
# owns now: on the stock scheduler's pool it would place beside it.
scheduler_allows(_) if pod_scheduler == ""

scheduler_allows(_) if migrate_from != ""

scheduler_allows(p) if pool_owner(p) == pod_scheduler

scheduler_allows(p) if {
	pod_scheduler != "gpuadmit-scheduler"
	pool_owner(p) == "default-scheduler"
}

warnings contains msg if {
	passed
	msg := sprintf("spec.schedulerName %q: this cluster's policy leaves the pods of that scheduler to it; gpuadmit did not decide for this pod and changed nothing", [pod_scheduler])
}

deny contains msg if {
	pod_scheduler != ""
	migrate_from == ""
	count(input.pools) > 0
	count([p | some p in input.pools; scheduler_allows(p)]) == 0
	owners := [sprintf("%s (%s)", [p.name, pool_owner(p)]) | some p in input.pools]
	msg := sprintf("spec.schedulerName %q owns no GPU pool of this cluster, and another scheduler owns each: %s; remove spec.schedulerName, or name the scheduler of the pool the pod should run on", [pod_scheduler, concat(", ", sort(owners))])
}
