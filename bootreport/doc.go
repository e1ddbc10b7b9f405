// Package bootreport is the guest's side of first-boot reporting: where a
// guest posts its agent's events and its final report under a vminit
// server's base URL, the unit that posts the report and how it is told the
// URL. The renderers (cloudinit, ignition) put these in a guest's data;
// the metadata server (mdserver) serves the paths and its tracker
// (mdserver/firstboot) reads what comes. It is a package of its own, a
// leaf, so that the data flows one way: the renderers know the contract,
// not the server.
package bootreport
