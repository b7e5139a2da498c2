{#- nbgrader 0.9.6 formgrader template (BSD-3-Clause, Project Jupyter) with a CSP nonce on every script, values as JSON, no inline handler (parallel_budget.grading.results.csp). -#}
{%- extends 'manage_students_base.tpl' -%}

{%- block head -%}
<script nonce="{{ csp_nonce }}" src="{{ base_url }}/formgrader/static/js/manage_students.js"></script>
<script nonce="{{ csp_nonce }}">
$(function () { $("#pb-createStudentModal").on("click", function (e) { e.preventDefault(); createStudentModal(); }); });
</script>
{%- endblock -%}

{%- block breadcrumbs -%}
<ol class="breadcrumb">
  <li class="active">Students</li>
</ol>
{%- endblock -%}

{%- block table_header -%}
<tr>
  <th>Name</th>
  <th class="text-center">Student ID</th>
  <th class="text-center">Email</th>
  <th class="text-center">Overall Score</th>
  <th class="text-center no-sort">Edit Student</th>
</tr>
{%- endblock -%}

{%- block table_body -%}
<tr><td colspan="5">Loading, please wait...</td></tr>
{%- endblock -%}

{%- block table_footer -%}
<tr>
  <td colspan="5">
    <span class="glyphicon glyphicon-plus" aria-hidden="true"></span>
    <a href="#" id="pb-createStudentModal">Add new student...</a>
  </td>
</tr>
{%- endblock -%}