package report

import "html/template"

// page is the HTML report: no script, no external asset, so it renders the
// same offline, in a mail, or in headless Chromium for a PNG.
var page = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>gpuadmit: where the GPUs go</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { border: 1px solid #ccc; padding: 2px 8px; text-align: right; white-space: nowrap; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
svg text { font: 12px system-ui, sans-serif; }
.legend span { display: inline-block; width: 12px; height: 12px; margin: 0 4px 0 12px; vertical-align: middle; }
</style>
</head>
<body>
<h1>gpuadmit: where the GPUs go</h1>
<p>GPU memory in real MiB; GPUs in GPUs of each pool's model; cost at the policy data's price per GPU-hour, counting only the models with a price. Definitions: docs/metrics.md.</p>
{{range .Charts}}
<h2>{{.Title}}</h2>
{{if .Legend}}<p class="legend">{{range .Legend}}<span style="background: {{.Color}}"></span>{{.Name}}{{end}}</p>{{end}}
<svg xmlns="http://www.w3.org/2000/svg" width="{{.Width}}" height="{{.Height}}" role="img" aria-label="{{.Title}}">
{{range .Bars}}<g transform="translate(0,{{.Y}})">
<text x="0" y="16">{{.Label}}</text>
{{range .Segs}}<rect x="{{.X}}" y="3" width="{{.W}}" height="18" fill="{{.Color}}"><title>{{.Name}}</title></rect>
{{end}}<text x="{{.End}}" dx="6" y="16">{{.Value}}</text>
</g>
{{end}}</svg>
{{end}}
{{range .Tables}}
<h2>{{.Title}}</h2>
{{if .Rows}}<table>
<tr>{{range .Headers}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range .}}<td{{if .Key}} data-k="{{.Key}}"{{end}}>{{.Text}}</td>{{end}}</tr>
{{end}}</table>{{else}}<p>None.</p>{{end}}
{{end}}
</body>
</html>
`))
