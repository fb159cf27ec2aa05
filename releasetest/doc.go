// Package releasetest checks the repository's modules as a user gets them:
// TestConsumerBuild releases a clone of HEAD with the release script, serves
// the tagged modules from a module proxy directory and builds and runs a
// program that uses each of them, in a module outside the repository. Its
// module is not released; it lives in the workspace (go.work) so that make
// test runs it.
package releasetest
