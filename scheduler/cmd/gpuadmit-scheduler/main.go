// Command gpuadmit-scheduler is kube-scheduler v1.37.0 with gpuadmit's
// placement plugin, GPUAdmit, registered beside the in-tree plugins. It takes
// kube-scheduler's flags; a profile enables the plugin through
// --config (deploy/scheduler/config.yaml is gpuadmit's).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/gpuadmit/gpuadmit/scheduler/placement"
)

func main() {
	cmd := app.NewSchedulerCommand(app.WithPlugin(placement.Name, placement.New))
	os.Exit(cli.Run(cmd))
}
