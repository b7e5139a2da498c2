{#- nbgrader 0.9.6 formgrader template (BSD-3-Clause, Project Jupyter) with a CSP nonce on every script, values as JSON, no inline handler (parallel_budget.grading.results.csp). -#}
{%- extends 'gradebook_base.tpl' -%}

{%- block head -%}
<script nonce="{{ csp_nonce }}">
var assignment_id = {{ assignment_id | tojson }};
</script>

<script nonce="{{ csp_nonce }}" src="{{ base_url }}/formgrader/static/js/gradebook_notebooks.js"></script>
{%- endblock head -%}

{%- block breadcrumbs -%}
<ol class="breadcrumb">
  <li><a href="{{ base_url }}/formgrader/gradebook">Manual Grading</a></li>
  <li class="active">{{ assignment_id }}</li>
</ol>
{%- endblock -%}

{%- block table_header -%}
<tr>
  <th>Notebook ID</th>
  <th class="text-center">Avg. Score</th>
  <th class="text-center">Avg. Code Score</th>
  <th class="text-center">Avg. Written Score</th>
  <th class="text-center">Avg. Task Score</th>
  <th class="text-center">Needs Manual Grade?</th>
</tr>
{%- endblock -%}

{%- block table_body -%}
<tr><td colspan="6">Loading, please wait...</td></tr>
{%- endblock -%}
