package bootreport_test

import (
	"fmt"

	"github.com/vminit/vminit/bootreport"
)

// A seed built for a fleet reports to one server (`vminit build
// --report-to`): the events and the final report go under its base URL.
func Example() {
	base, err := bootreport.ParseBaseURL("http://192.0.2.10:8080/")
	if err != nil {
		panic(err)
	}
	fmt.Println(bootreport.EventsURL(base))
	fmt.Println(bootreport.ReportURL(base))
	fmt.Println(bootreport.ReportUnit)
	// Output:
	// http://192.0.2.10:8080/vminit/v1/events
	// http://192.0.2.10:8080/vminit/v1/report
	// vminit-first-boot-report.service
}
