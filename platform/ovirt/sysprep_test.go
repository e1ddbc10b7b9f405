package ovirt_test

import (
	"strings"
	"testing"

	"github.com/vminit/vminit/internal/testing/platformtest"
	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/spec"
)

// TestSysprep: a Windows VM's custom_script is the answer file, its
// placeholders filled as the engine's SysprepHandler fills them from the
// body, those from the engine's configuration said; a malformed one is an
// error naming custom_script and the line.
func TestSysprep(t *testing.T) {
	const answer = `&lt;unattend xmlns="urn:schemas-microsoft-com:unattend"&gt;
  &lt;settings pass="specialize"&gt;&lt;component name="Microsoft-Windows-Shell-Setup"&gt;&lt;ComputerName&gt;$ComputerName$&lt;/ComputerName&gt;&lt;TimeZone&gt;$TimeZone$&lt;/TimeZone&gt;&lt;ProductKey&gt;$ProductKey$&lt;/ProductKey&gt;&lt;/component&gt;&lt;/settings&gt;
  &lt;settings pass="oobeSystem"&gt;&lt;component name="Microsoft-Windows-Shell-Setup"&gt;&lt;AdministratorPassword&gt;$AdminPassword$&lt;/AdministratorPassword&gt;&lt;/component&gt;&lt;/settings&gt;
&lt;/unattend&gt;`
	body := func(script string) string {
		return `<vm><name>win-server-2022-a</name><os><type>windows_2022</type></os><initialization>
<host_name>win-server-2022-a.example.com</host_name><root_password>Secret1!</root_password>
<timezone>W. Europe Standard Time</timezone><custom_script>` + script + `</custom_script></initialization></vm>`
	}
	platformtest.Run(t, []platformtest.Case{
		{Name: "answer file filled", Doc: body(answer),
			Warns: []string{
				"vm.initialization.custom_script: Unattend.xml passed through as the engine delivers it",
				"configuring specialize (Microsoft-Windows-Shell-Setup); oobeSystem (Microsoft-Windows-Shell-Setup)",
				"placeholders filled from the body: $ComputerName$, $TimeZone$, $AdminPassword$",
				"the engine fills them from its configuration (osinfo, engine-config): $ProductKey$",
			},
			Check: func(t *testing.T, _ *spec.Spec, r *platform.Result) {
				got := string(r.Sysprep.Files[0].Data)
				for _, w := range []string{"<ComputerName>win-server-2022</ComputerName>", "<TimeZone>W. Europe Standard Time</TimeZone>", "<AdministratorPassword>Secret1!</AdministratorPassword>", "<ProductKey>$ProductKey$</ProductKey>"} {
					if !strings.Contains(got, w) {
						t.Errorf("answer file lacks %q:\n%s", w, got)
					}
				}
			}},
		{Name: "malformed", Doc: body("&lt;unattend&gt;&lt;settings&gt;&lt;/unattend&gt;"),
			Errs: []string{"vm.initialization.custom_script: the answer file is not well-formed XML", "line 1"}},
	})
}
