# Quota: an early, friendly denial when the namespace's GPU memory quota
# cannot hold even the smallest form of the request. The API server's
# ResourceQuota stays the authority (it counts what gpuadmit really gives,
# race-free); this only names the quota before the pod is rewritten.
package gpuadmit

memory_resource := "gpuadmit.io/gpu-memory-mib"

# pod_min_mib is the least GPU memory the pod can be given: what its memory
# requests ask for, app containers summed, init containers at their largest.
pod_min_mib := max([app_mib, init_mib])

app_mib := sum([mib |
	some c in input.containers
	c.kind != "init"
	c.form == "memory"
	mib := c.memoryMiB * c.count
])

init_mib := max(array.concat([0], [mib |
	some c in input.containers
	c.kind == "init"
	c.form == "memory"
	mib := c.memoryMiB * c.count
]))

deny contains msg if {
	hard := input.quota.hard[memory_resource]
	left := hard - object.get(input.quota.used, memory_resource, 0)
	pod_min_mib > left
	msg := sprintf("namespace %s has %d MiB of GPU memory left under its quota (ResourceQuota %s: %d MiB); this pod needs at least %d MiB", [input.namespace.name, left, input.quota.name, hard, pod_min_mib])
}
