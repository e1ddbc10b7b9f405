package delivery_test

import (
	"fmt"
	"strings"

	"github.com/vminit/vminit/delivery"
)

func Example() {
	fmt.Println(strings.Join(delivery.QEMUArgs("/var/lib/vms/web-1.ign"), " "))
	fmt.Print(delivery.LibvirtSysinfo("/var/lib/vms/web-1.ign"))

	ec2, _ := delivery.LookupTransport("ec2")
	config := []byte(`{"ignition":{"version":"3.0.0"}}`)
	payload, publish, err := delivery.Fit(config, ec2, "", nil)
	fmt.Println(string(payload), publish == nil, err)
	// Output:
	// -fw_cfg name=opt/com.coreos/config,file=/var/lib/vms/web-1.ign
	// <sysinfo type='fwcfg'>
	//   <entry name='opt/com.coreos/config' file='/var/lib/vms/web-1.ign'/>
	// </sysinfo>
	// {"ignition":{"version":"3.0.0"}} true <nil>
}
