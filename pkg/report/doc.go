// Package report shows where a cluster's GPUs go (pkg/usage) to a person:
// the figures the usage metrics export, computed once from a cluster (what
// the webhook's leader reads from its caches, listed from the API server)
// or offline from files, as a table for a terminal, as JSON, or as one
// self-contained HTML page with bar charts for a weekly review.
//
// View is the report in the form all three print: flat lists with each
// figure once, GPU counts and costs rounded to two decimals, so the HTML
// and the table show exactly the JSON's numbers.
package report
