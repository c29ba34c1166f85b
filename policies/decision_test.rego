package gpuadmit_test

import data.gpuadmit

h100_mig := {
	"name": "h100-mig", "model": "H100-80GB", "mode": "mig-mixed", "gpuMemoryMiB": 81559, "memorySlices": 8,
	"profiles": [
		{"name": "1g.10gb", "memoryMiB": 9984, "memorySlices": 1, "computeSlices": 1},
		{"name": "1g.20gb", "memoryMiB": 20096, "memorySlices": 2, "computeSlices": 1},
		{"name": "3g.40gb", "memoryMiB": 40448, "memorySlices": 4, "computeSlices": 3},
		{"name": "7g.80gb", "memoryMiB": 81152, "memorySlices": 8, "computeSlices": 7},
	],
	"taints": [{"key": "gpu", "value": "h100", "effect": "NoSchedule"}],
}

a100_mig := {
	"name": "a100-mig", "model": "A100-40GB", "mode": "mig-mixed", "gpuMemoryMiB": 40960, "memorySlices": 8,
	"profiles": [
		{"name": "1g.5gb", "memoryMiB": 4864, "memorySlices": 1, "computeSlices": 1},
		{"name": "3g.20gb", "memoryMiB": 19968, "memorySlices": 4, "computeSlices": 3},
	],
	"taints": [],
}

t4_shared := {"name": "t4-shared", "model": "T4", "mode": "shared", "gpuMemoryMiB": 15360, "profiles": [], "taints": []}

a100_whole := {"name": "a100-whole", "model": "A100-80GB", "mode": "whole", "gpuMemoryMiB": 81920, "taints": []}

t4_whole := {"name": "t4-whole", "model": "T4", "mode": "whole", "gpuMemoryMiB": 15360, "taints": []}

all_pools := [h100_mig, a100_mig, t4_shared, a100_whole, t4_whole]

mem(name, mib) := {"name": name, "kind": "app", "dialect": "hami", "form": "memory", "count": 1, "memoryMiB": mib, "fractionMilli": 0, "coresPercent": 0}

pod_input(containers, hints) := {
	"operation": "CREATE",
	"pod": {"metadata": {"name": "p"}, "spec": {}},
	"namespace": {"name": "team-a", "labels": {}},
	"containers": containers,
	"hints": object.union({"class": "", "backend": "", "model": ""}, hints),
	"pools": all_pools,
}

pools_of(d, name) := [c.pool | some c in d.placement[name]]

test_memory_prefers_the_smallest_covering_mig_pool if {
	d := gpuadmit.decision with input as pod_input([mem("main", 3000)], {})
	pools_of(d, "main") == ["a100-mig", "h100-mig", "t4-shared", "t4-whole", "a100-whole"]
	d.placement.main[0].backend == "mig"
	d.placement.main[2].backend == "shared"
	d.placement.main[4].backend == "whole"
}

test_memory_above_small_slices_ranks_by_real_size if {
	# 15000 MiB: A100's 3g.20gb (19968) beats H100's 1g.20gb (20096) by real MiB.
	d := gpuadmit.decision with input as pod_input([mem("main", 15000)], {})
	pools_of(d, "main")[0] == "a100-mig"
	pools_of(d, "main")[1] == "h100-mig"
}

test_mig_pool_that_cannot_cover_goes_last_among_mig if {
	d := gpuadmit.decision with input as pod_input([mem("main", 30000)], {})
	pools_of(d, "main")[0] == "h100-mig"
	pools_of(d, "main")[1] == "a100-mig"
}

test_whole_stays_whole if {
	c := {"name": "main", "kind": "app", "dialect": "nvidia", "form": "whole", "count": 2, "memoryMiB": 0, "fractionMilli": 0, "coresPercent": 0}
	d := gpuadmit.decision with input as pod_input([c], {})
	pools_of(d, "main") == ["t4-whole", "a100-whole"]
	every cand in d.placement.main { cand.backend == "whole" }
}

test_share_dialect_stays_a_share if {
	c := object.union(mem("main", 3072), {"dialect": "share"})
	d := gpuadmit.decision with input as pod_input([c], {})
	pools_of(d, "main") == ["t4-shared"]
}

test_profile_form_goes_only_to_mig if {
	c := {"name": "main", "kind": "app", "dialect": "mig", "form": "profile", "profile": "1g.10gb", "count": 1, "memoryMiB": 0, "fractionMilli": 0, "coresPercent": 0}
	d := gpuadmit.decision with input as pod_input([c], {})
	pools_of(d, "main")[0] == "h100-mig"
	every cand in d.placement.main { cand.backend == "mig" }
}

test_backend_hint_narrows if {
	d := gpuadmit.decision with input as pod_input([mem("main", 3000)], {"backend": "shared"})
	pools_of(d, "main") == ["t4-shared"]
}

test_model_hint_narrows if {
	d := gpuadmit.decision with input as pod_input([mem("main", 3000)], {"model": "h100-80gb"})
	pools_of(d, "main") == ["h100-mig"]
	count(d.deny) == 0
}

test_unknown_model_is_denied if {
	d := gpuadmit.decision with input as pod_input([mem("main", 3000)], {"model": "B200"})
	some msg in d.deny
	contains(msg, "B200")
}

test_a_model_on_a_cluster_without_pools_says_so if {
	d := gpuadmit.decision with input as object.union(pod_input([mem("main", 16000)], {"model": "H200-141GB"}), {"pools": []})
	d.deny == {`gpuadmit.io/model "H200-141GB": no GPU pool of this cluster has that model; the cluster has no GPU pools`}
}

test_use_gputype_on_a_cluster_without_pools_says_so if {
	d := gpuadmit.decision with input as object.union(pod_input([mem("main", 3000)], {"useTypes": ["a100"]}), {"pools": []})
	some msg in d.deny
	endswith(msg, "no GPU pool of this cluster has a GPU of those types; the cluster has no GPU pools")
}

test_use_gputype_keeps_pools_whose_model_or_product_contains_a_type if {
	d := gpuadmit.decision with input as pod_input([mem("main", 3000)], {"useTypes": ["a100", "V100"]})
	pools_of(d, "main") == ["a100-mig", "a100-whole"]
	count(d.deny) == 0
}

test_use_gputype_matches_the_product_label if {
	pools := [object.union(t4_whole, {"product": "Tesla-T4"}), a100_whole]
	pin := object.union(pod_input([mem("main", 3000)], {"useTypes": ["Tesla"]}), {"pools": pools})
	d := gpuadmit.decision with input as pin
	pools_of(d, "main") == ["t4-whole"]
}

test_nouse_gputype_drops_pools if {
	d := gpuadmit.decision with input as pod_input([mem("main", 3000)], {"avoidTypes": ["A100", "T4"]})
	pools_of(d, "main") == ["h100-mig"]
}

test_gpu_types_that_leave_no_pool_are_denied_naming_the_pools if {
	d := gpuadmit.decision with input as pod_input([mem("main", 3000)], {"useTypes": ["V100"]})
	some msg in d.deny
	contains(msg, `nvidia.com/use-gputype "V100"`)
	contains(msg, "t4-whole (model T4")
}

test_tolerations_follow_the_pool_taints if {
	d := gpuadmit.decision with input as pod_input([mem("main", 30000)], {})
	d.placement.main[0].tolerations == [{"key": "gpu", "operator": "Equal", "value": "h100", "effect": "NoSchedule"}]
}

test_class_maps_to_priority_class if {
	d := gpuadmit.decision with input as pod_input([mem("main", 3000)], {"class": "inference"})
	d.priorityClassName == "gpuadmit-inference"
	count(d.deny) == 0
}

test_no_class_no_priority_class if {
	d := gpuadmit.decision with input as pod_input([mem("main", 3000)], {})
	d.priorityClassName == ""
}

test_namespace_label_overrides_the_map if {
	pin := pod_input([mem("main", 3000)], {"class": "training"})
	ns := {"name": "team-a", "labels": {"gpuadmit.io/priority.training": "team-a-training"}}
	d := gpuadmit.decision with input as object.union(pin, {"namespace": ns})
	d.priorityClassName == "team-a-training"
}

test_namespace_default_class if {
	pin := pod_input([mem("main", 3000)], {})
	ns := {"name": "team-a", "labels": {"gpuadmit.io/class": "batch"}}
	d := gpuadmit.decision with input as object.union(pin, {"namespace": ns})
	d.priorityClassName == "gpuadmit-batch"
}

test_unknown_class_is_denied if {
	d := gpuadmit.decision with input as pod_input([mem("main", 3000)], {"class": "vip"})
	d.deny == {`gpuadmit.io/class "vip" is not a class of this cluster; accepted: batch, inference, training`}
}

test_user_priority_class_conflict_is_denied if {
	pin := pod_input([mem("main", 3000)], {"class": "batch"})
	d := gpuadmit.decision with input as object.union(pin, {"pod": {"spec": {"priorityClassName": "system-node-critical"}}})
	some msg in d.deny
	contains(msg, "system-node-critical")
}

test_user_priority_class_agreeing_is_fine if {
	pin := pod_input([mem("main", 3000)], {"class": "batch"})
	d := gpuadmit.decision with input as object.union(pin, {"pod": {"spec": {"priorityClassName": "gpuadmit-batch"}}})
	count(d.deny) == 0
}

test_cores_are_warned_about if {
	c := object.union(mem("main", 3000), {"coresPercent": 30})
	d := gpuadmit.decision with input as pod_input([c], {})
	some msg in d.warnings
	contains(msg, "30%")
}

test_every_container_gets_candidates_by_real_size if {
	# 20000 MiB misses A100's 3g.20gb (19968 MiB real), so H100's 1g.20gb (20096) leads.
	d := gpuadmit.decision with input as pod_input([mem("a", 1000), mem("b", 20000)], {})
	pools_of(d, "a")[0] == "a100-mig"
	pools_of(d, "b")[0] == "h100-mig"
}

with_quota(pin, hard, used) := object.union(pin, {"quota": {"name": "gpuadmit", "hard": {"gpuadmit.io/gpu-memory-mib": hard}, "used": {"gpuadmit.io/gpu-memory-mib": used}}})

test_quota_that_cannot_hold_the_request_is_named if {
	pin := pod_input([mem("main", 3000)], {})
	d := gpuadmit.decision with input as with_quota(pin, 4096, 2048)
	some msg in d.deny
	contains(msg, "2048 MiB of GPU memory left")
	contains(msg, "needs at least 3000 MiB")
}

test_quota_with_room_is_no_denial if {
	pin := pod_input([mem("main", 3000)], {})
	d := gpuadmit.decision with input as with_quota(pin, 4096, 1000)
	count(d.deny) == 0
}

test_quota_counts_every_gpu_and_init_containers_as_kubernetes_does if {
	two := object.union(mem("a", 2048), {"count": 2})
	init := object.union(mem("i", 3000), {"kind": "init"})
	pin := pod_input([init, two, mem("b", 500)], {})
	d := gpuadmit.decision with input as with_quota(pin, 4500, 0)
	some msg in d.deny
	contains(msg, "needs at least 4596 MiB")
}

test_no_quota_no_denial if {
	d := gpuadmit.decision with input as pod_input([mem("main", 300000)], {})
	count(d.deny) == 0
}

test_a_model_out_of_quota_goes_last if {
	pools := [object.union(a100_mig, {"modelResource": "gpuadmit.io/a100-40gb-mib"}), object.union(h100_mig, {"modelResource": "gpuadmit.io/h100-80gb-mib"})]
	pin := object.union(pod_input([mem("main", 3000)], {}), {"pools": pools})
	d := gpuadmit.decision with input as object.union(pin, {"quota": {"name": "gpuadmit", "hard": {"gpuadmit.io/a100-40gb-mib": 4096}, "used": {"gpuadmit.io/a100-40gb-mib": 2048}}})
	pools_of(d, "main") == ["h100-mig", "a100-mig"]
}

# Share pools of gpuadmit's agent serve one share size each (sharesPerGPU
# shares of shareUnitMiB): the smallest share that covers goes first, and a
# share too small for the request goes last.
h100_share_8 := {"name": "h100-share-8", "model": "H100-80GB", "mode": "shared", "gpuMemoryMiB": 81559, "sharesPerGPU": 8, "shareUnitMiB": 10194, "taints": []}

h100_share_4 := {"name": "h100-share-4", "model": "H100-80GB", "mode": "shared", "gpuMemoryMiB": 81559, "sharesPerGPU": 4, "shareUnitMiB": 20389, "taints": []}

share_input(mib) := object.union(pod_input([mem("main", mib)], {"backend": "shared"}), {"pools": [h100_share_4, h100_share_8]})

test_share_goes_to_the_smallest_share_that_covers if {
	d := gpuadmit.decision with input as share_input(8000)
	pools_of(d, "main") == ["h100-share-8", "h100-share-4"]
}

test_share_too_small_goes_last if {
	d := gpuadmit.decision with input as share_input(15000)
	pools_of(d, "main") == ["h100-share-4", "h100-share-8"]
}

a100_single := {
	"name": "a100-single", "model": "A100-40GB", "mode": "mig-single", "gpuMemoryMiB": 40960, "memorySlices": 8,
	"product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
	"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"},
	"profiles": [{"name": "1g.5gb", "memoryMiB": 4864, "memorySlices": 1, "computeSlices": 1}],
	"taints": [],
}

whole(name, n) := {"name": name, "kind": "app", "dialect": "nvidia", "form": "whole", "count": n, "memoryMiB": 0, "fractionMilli": 0, "coresPercent": 0}

single_input(selector) := object.union(pod_input([whole("main", 1)], {}), {
	"pools": [a100_single, a100_whole],
	"pod": {"metadata": {"name": "p"}, "spec": {"nodeSelector": selector}},
})

test_whole_gpu_selecting_a_mig_single_pool_is_its_slice if {
	d := gpuadmit.decision with input as single_input({"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"})
	d.placement.main[0] == {"pool": "a100-single", "backend": "mig", "profile": "1g.5gb", "rule": "default/whole-on-selected-mig-single", "tolerations": [], "schedulerName": "default-scheduler"}
}

test_whole_gpu_without_that_selector_stays_whole if {
	d := gpuadmit.decision with input as single_input({"kubernetes.io/os": "linux"})
	pools_of(d, "main") == ["a100-whole"]
}

test_several_gpus_prefer_whole_gpus if {
	d := gpuadmit.decision with input as pod_input([object.union(mem("main", 30000), {"count": 2})], {})
	d.placement.main[0].backend == "whole"
	[b | some cand in d.placement.main; b := cand.backend][count(d.placement.main) - 1] != "whole"
}

test_one_gpu_still_prefers_mig if {
	d := gpuadmit.decision with input as pod_input([mem("main", 30000)], {})
	d.placement.main[0].backend == "mig"
}

test_several_slices_denied_by_data_leaves_no_mig_candidate if {
	d := gpuadmit.decision with input as pod_input([object.union(mem("main", 30000), {"count": 2})], {})
		with data.gpuadmit.config.severalMIGSlicesPerContainer as "deny"
	every cand in d.placement.main { cand.backend != "mig" }
}

test_several_profile_slices_denied_by_data if {
	c := {"name": "main", "kind": "app", "dialect": "mig", "form": "profile", "profile": "3g.40gb", "count": 2, "memoryMiB": 0, "fractionMilli": 0, "coresPercent": 0}
	d := gpuadmit.decision with input as pod_input([c], {})
		with data.gpuadmit.config.severalMIGSlicesPerContainer as "deny"
	some msg in d.deny
	contains(msg, "2 MIG 3g.40gb slices")
}

l4_sliced := {"name": "l4-time-sliced", "model": "L4", "mode": "time-sliced", "gpuMemoryMiB": 23034, "replicasPerGPU": 4, "taints": []}

sliced_input(containers) := object.union(pod_input(containers, {}), {"pools": array.concat(all_pools, [l4_sliced])})

test_whole_gpus_take_replicas_after_whole_pools if {
	d := gpuadmit.decision with input as sliced_input([whole("main", 2)])
	[[c.pool, c.backend] | some c in d.placement.main] == [["t4-whole", "whole"], ["a100-whole", "whole"], ["l4-time-sliced", "time-sliced"]]
}

test_memory_may_take_a_replica_before_whole_gpus if {
	d := gpuadmit.decision with input as sliced_input([mem("main", 3000)])
		with data.gpuadmit.config.memoryOnTimeSlicedGPUs as "warn"
	pools_of(d, "main") == ["a100-mig", "h100-mig", "t4-shared", "l4-time-sliced", "t4-whole", "a100-whole"]
	d.placement.main[3].backend == "time-sliced"
}

test_memory_never_on_replicas_when_the_data_says_never if {
	d := gpuadmit.decision with input as sliced_input([mem("main", 3000)])
		with data.gpuadmit.config.memoryOnTimeSlicedGPUs as "never"
	not "l4-time-sliced" in pools_of(d, "main")
}

test_a_mig_or_share_hint_keeps_off_replicas if {
	d := gpuadmit.decision with input as object.union(sliced_input([whole("main", 1)]), {"hints": {"class": "", "backend": "whole", "model": ""}})
	not "l4-time-sliced" in pools_of(d, "main")
}

sliced_hint_input(containers) := object.union(sliced_input(containers), {
	"pod": {"metadata": {"name": "p", "annotations": {"gpuadmit.io/backend": "time-sliced"}}, "spec": {}},
	"hints": {"class": "", "backend": "time-sliced", "model": ""},
})

test_a_time_sliced_hint_takes_replicas_only if {
	d := gpuadmit.decision with input as sliced_hint_input([whole("main", 1)])
	[[c.pool, c.backend] | some c in d.placement.main] == [["l4-time-sliced", "time-sliced"]]
}

test_a_time_sliced_hint_gives_memory_a_replica_where_the_data_warns if {
	d := gpuadmit.decision with input as sliced_hint_input([mem("main", 3000)])
		with data.gpuadmit.config.memoryOnTimeSlicedGPUs as "warn"
	[[c.pool, c.backend] | some c in d.placement.main] == [["l4-time-sliced", "time-sliced"]]
	count(d.deny) == 0
}

# The hint narrows the choice, never widens it: under "never" a request
# sized in memory gets no replica, and the pod is denied with what to write.
test_a_time_sliced_hint_does_not_override_never if {
	c := object.union(mem("main", 3000), {"source": ["nvidia.com/gpumem=3000"]})
	d := gpuadmit.decision with input as sliced_hint_input([c])
		with data.gpuadmit.config.memoryOnTimeSlicedGPUs as "never"
	count(d.placement.main) == 0
	some msg in d.deny
	contains(msg, `container "main" asks for GPU sized in memory or as a fraction (nvidia.com/gpumem=3000)`)
	contains(msg, `gpuadmit.io/backend is "time-sliced"`)
	contains(msg, "memoryOnTimeSlicedGPUs: never")
	contains(msg, "remove gpuadmit.io/backend")
}

test_replicas_beside_memory_are_denied_under_never_naming_the_container if {
	shared := {"name": "side", "kind": "app", "dialect": "nvidia-shared", "form": "whole", "count": 1, "memoryMiB": 0, "fractionMilli": 0, "coresPercent": 0, "source": ["nvidia.com/gpu.shared=1"]}
	c := object.union(mem("main", 3000), {"source": ["nvidia.com/gpumem=3000"]})
	d := gpuadmit.decision with input as object.union(sliced_input([shared, c]), {"hints": {"class": "", "backend": "time-sliced", "model": ""}})
		with data.gpuadmit.config.memoryOnTimeSlicedGPUs as "never"
	pools_of(d, "side") == ["l4-time-sliced"]
	some msg in d.deny
	contains(msg, `container "main" asks for GPU sized in memory or as a fraction (nvidia.com/gpumem=3000)`)
	contains(msg, `container "side" asks for nvidia.com/gpu.shared, which puts the whole pod on a time-sliced pool`)
	contains(msg, "ask for it in a pod without nvidia.com/gpu.shared")
}

test_a_time_sliced_hint_keeps_whole_gpus_on_replicas_under_never if {
	d := gpuadmit.decision with input as sliced_hint_input([whole("main", 2)])
		with data.gpuadmit.config.memoryOnTimeSlicedGPUs as "never"
	pools_of(d, "main") == ["l4-time-sliced"]
	count(d.deny) == 0
}

scheduled_input(scheduler) := object.union(pod_input([mem("main", 3000)], {}), {
	"pod": {"metadata": {"name": "p"}, "spec": {"schedulerName": scheduler}},
	"pools": [a100_mig, t4_whole],
})

# recorded is input.cluster as gpuadmit's controller records it: pool → whether gpuadmit-scheduler may own it.
recorded(owners) := {"cluster": {"schedulers": ["gpuadmit-scheduler"], "owners": owners}}

with_schedulers(owners, coexist) := {"migrate": ["kai-scheduler", "volcano", "hami-scheduler"], "coexist": coexist, "owners": owners}

test_default_scheduler_counts_as_unset if {
	d := gpuadmit.decision with input as scheduled_input("default-scheduler")
	d.migrateFrom == ""
	not d.pass
	pools_of(d, "main") == ["a100-mig", "t4-whole"]
	[c.schedulerName | some c in d.placement.main] == ["default-scheduler", "default-scheduler"]
}

test_gpuadmit_scheduler_owns_every_pool_while_it_runs if {
	running := object.union(scheduled_input("default-scheduler"), recorded({"a100-mig": "gpuadmit-scheduler", "t4-whole": "gpuadmit-scheduler"}))
	d := gpuadmit.decision with input as running
	[c.schedulerName | some c in d.placement.main] == ["gpuadmit-scheduler", "gpuadmit-scheduler"]

	# The data's owners and defaultOwner come first.
	named := gpuadmit.decision with input as running
		with data.gpuadmit.config.schedulers as with_schedulers({"t4-whole": "default-scheduler"}, [])
	[[c.pool, c.schedulerName] | some c in named.placement.main] == [["a100-mig", "gpuadmit-scheduler"], ["t4-whole", "default-scheduler"]]
	chosen := gpuadmit.decision with input as running
		with data.gpuadmit.config.schedulers as object.union(with_schedulers({}, []), {"defaultOwner": "default-scheduler"})
	[c.schedulerName | some c in chosen.placement.main] == ["default-scheduler", "default-scheduler"]
}

test_gpuadmit_scheduler_owns_nothing_when_it_does_not_run if {
	d := gpuadmit.decision with input as object.union(scheduled_input("default-scheduler"), {"cluster": {"schedulers": []}})
	[c.schedulerName | some c in d.placement.main] == ["default-scheduler", "default-scheduler"]
}

# gpuadmit-scheduler gets only the pools the controller records for it: a
# pool still draining stock pods, or being released, stays the stock
# scheduler's even while gpuadmit-scheduler runs, and so does a pool the
# data names for it.
test_gpuadmit_scheduler_owns_only_the_pools_recorded_for_it if {
	d := gpuadmit.decision with input as object.union(scheduled_input("default-scheduler"), recorded({"a100-mig": "gpuadmit-scheduler", "t4-whole": "releasing"}))
	[[c.pool, c.schedulerName] | some c in d.placement.main] == [["a100-mig", "gpuadmit-scheduler"], ["t4-whole", "default-scheduler"]]
	named := gpuadmit.decision with input as object.union(scheduled_input("default-scheduler"), recorded({"a100-mig": "default-scheduler"}))
		with data.gpuadmit.config.schedulers as with_schedulers({"a100-mig": "gpuadmit-scheduler"}, [])
	[c.schedulerName | some c in named.placement.main] == ["default-scheduler", "default-scheduler"]
}

# A pod that names gpuadmit-scheduler keeps to the pools it owns now: on a
# stock scheduler's pool it would place beside the stock scheduler.
test_a_pod_naming_gpuadmit_scheduler_keeps_to_its_pools if {
	d := gpuadmit.decision with input as object.union(scheduled_input("gpuadmit-scheduler"), recorded({"a100-mig": "gpuadmit-scheduler"}))
	pools_of(d, "main") == ["a100-mig"]
	none := gpuadmit.decision with input as object.union(scheduled_input("gpuadmit-scheduler"), recorded({}))
	some msg in none.deny
	contains(msg, "spec.schedulerName \"gpuadmit-scheduler\" owns no GPU pool")
}

test_a_migrated_scheduler_is_taken_over if {
	d := gpuadmit.decision with input as scheduled_input("volcano")
	d.migrateFrom == "volcano"
	count(d.deny) == 0
	pools_of(d, "main") == ["a100-mig", "t4-whole"]
}

test_a_pool_owner_is_named_on_its_candidates if {
	d := gpuadmit.decision with input as object.union(scheduled_input("kai-scheduler"), recorded({"t4-whole": "gpuadmit-scheduler"}))
		with data.gpuadmit.config.schedulers as with_schedulers({"t4-whole": "gpuadmit-scheduler"}, [])
	[[c.pool, c.schedulerName] | some c in d.placement.main] == [["a100-mig", "default-scheduler"], ["t4-whole", "gpuadmit-scheduler"]]
}

test_a_coexisting_scheduler_passes_with_a_warning if {
	d := gpuadmit.decision with input as object.union(scheduled_input("hami-scheduler"), {"hints": {"class": "nosuch", "backend": "", "model": ""}})
		with data.gpuadmit.config.schedulers as with_schedulers({}, ["hami-scheduler"])
	d.pass
	d.migrateFrom == ""
	count(d.deny) == 0
	some w in d.warnings
	contains(w, "spec.schedulerName \"hami-scheduler\"")
}

test_an_unlisted_scheduler_keeps_to_unowned_pools_and_its_own if {
	d := gpuadmit.decision with input as object.union(scheduled_input("my-scheduler"), recorded({"a100-mig": "gpuadmit-scheduler"}))
		with data.gpuadmit.config.schedulers as with_schedulers({"a100-mig": "gpuadmit-scheduler"}, [])
	pools_of(d, "main") == ["t4-whole"]
	d.migrateFrom == ""
}

test_an_unlisted_scheduler_that_owns_no_usable_pool_is_denied if {
	d := gpuadmit.decision with input as object.union(scheduled_input("my-scheduler"), recorded({"a100-mig": "gpuadmit-scheduler", "t4-whole": "gpuadmit-scheduler"}))
		with data.gpuadmit.config.schedulers as with_schedulers({"a100-mig": "gpuadmit-scheduler", "t4-whole": "gpuadmit-scheduler"}, [])
	some msg in d.deny
	contains(msg, "spec.schedulerName \"my-scheduler\" owns no GPU pool")
}
