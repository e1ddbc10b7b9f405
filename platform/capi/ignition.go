package capi

import (
	"fmt"
	"strings"

	"github.com/vminit/vminit/spec"
)

// Cluster API's Ignition contract, as its kubeadm bootstrap provider's
// ignition package writes it: kubeadm runs from KubeadmUnit, which runs
// KubeadmScript once, while IgnitionConfigPath exists (the script moves
// it to /tmp). Templates rely on both names: their additionalConfig
// attaches drop-ins to kubeadm.service (Flatcar's
// EnvironmentFile=/run/metadata/flatcar, After=coreos-metadata.service,
// which the pre commands' variables come from), and providers' scripts
// look for /etc/kubeadm.sh.
const (
	KubeadmUnit   = "kubeadm.service"
	KubeadmScript = "/etc/kubeadm.sh"
)

// kubeadmUnitText is CABPK's kubeadm.service, byte for byte, so that a
// drop-in written against it means the same here.
const kubeadmUnitText = `[Unit]
Description=kubeadm
# Run only once. After successful run, this file is moved to /tmp/.
ConditionPathExists=/etc/kubeadm.yml
After=network.target
[Service]
# To not restart the unit when it exits, as it is expected.
Type=oneshot
ExecStart=/bin/bash /etc/kubeadm.sh
[Install]
WantedBy=multi-user.target
`

// kubeadmService writes the kubeadm configuration, KubeadmScript and
// KubeadmUnit as CABPK's Ignition does: the configuration 0600, the
// script 0700 with set -e (a failing pre command stops kubeadm; a failing
// kubeadm leaves no sentinel and skips the post commands). cmd is the
// kubeadm command line; without a verbosity CABPK's template leaves a
// blank after it, kept so that the script is CABPK's byte for byte.
func (c *conv) kubeadmService(config, cmd string) {
	cs := c.cs
	c.addFile(textFile(IgnitionConfigPath, 0o600, "", []byte(config)), c.path)
	if cs.Verbosity == nil {
		cmd += " "
	}
	script := kubeadmScriptText(cs.PreKubeadmCommands, cmd, cs.PostKubeadmCommands)
	c.addFile(textFile(KubeadmScript, 0o700, "", []byte(script)), c.path)
	t := true
	s := &c.b.Instance.Spec
	c.b.From(fmt.Sprintf("spec.units[%d]", len(s.Units)), c.path)
	s.Units = append(s.Units, spec.Unit{Name: KubeadmUnit, Enabled: &t, Content: kubeadmUnitText})
}

// kubeadmScriptText is /etc/kubeadm.sh as CABPK's template renders it:
// the pre commands, kubeadm, the sentinel, the configuration moved away
// (so the unit's condition stops it next boot), the post commands.
func kubeadmScriptText(pre []string, kubeadm string, post []string) string {
	var b strings.Builder
	b.WriteString("#!/bin/bash\nset -e\n\n")
	for _, p := range pre {
		b.WriteString(p + "\n")
	}
	b.WriteString("\n" + kubeadm + "\n")
	b.WriteString("mkdir -p /run/cluster-api && echo success > " + SentinelFile + "\n")
	b.WriteString("mv " + IgnitionConfigPath + " /tmp/\n")
	if len(post) > 0 {
		b.WriteString("\n")
	}
	for _, p := range post {
		b.WriteString(p + "\n")
	}
	return b.String()
}
