package firstboot

// TextOf is textOf, for the tests of package firstboot_test (which may
// import mdbench: firstboot's own tests may not).
var TextOf = textOf
