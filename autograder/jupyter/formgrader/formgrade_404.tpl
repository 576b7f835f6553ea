{#- Formgrader's page for a submission whose autograded notebook is missing. nbgrader 0.9.6's own
    formgrade_404.tpl imports "formgrade_macros.tpl", which nbgrader does not ship (its macros are
    formgrade/formgrade_macros.html.j2), so the page failed with formgrader's "encountered an error"
    (HTTP 500) instead of naming the file. This copy imports the macros nbgrader has. The page names
    the missing file, whose path holds the student's id: like every value on formgrader's pages it
    is escaped, since the course renders them with Jinja's autoescape
    (autograder/jupyter_server_config.py, issue 40). -#}
{% from 'formgrade/formgrade_macros.html.j2' import nav, header %}
<!DOCTYPE html>
<html>
<head>
{{ header(resources) }}
<link rel="stylesheet" href="{{ resources.base_url }}/formgrader/static/css/formgrade.css" />
</head>

<body>
  {{ nav(resources) }}
  <div class="container">
    <div class="panel panel-default">
      <div class="panel-heading">
        <h4 class="panel-title">
          <span>{{ resources.notebook_id }}</span>
          <span class="pull-right">Submission {{ resources.index + 1 }} / {{ resources.total }}</span>
        </h4>
      </div>
      <div class="panel-body">
        <div id="notebook" class="border-box-sizing">
          <div class="container" id="notebook-container">
            Error: Submission notebook file not found: <code id="missing-file">{{ resources.filename }}</code>
          </div>
        </div>
      </div>
    </div>
  </div>
</body>
</html>
