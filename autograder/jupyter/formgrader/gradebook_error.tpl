{#- Formgrader's page when the gradebook cannot be opened (a PostgreSQL database that does not
    exist, a server that does not answer): the one line autograder/postgres.py gives nbgrader's own
    commands, instead of a page that stays at "Loading, please wait..." (issue 45).
    autograder/jupyter_server_config.py renders it for every formgrader page it stops. -#}
{%- extends 'base.tpl' -%}

{%- block title -%}
The gradebook cannot be opened
{%- endblock -%}

{%- block body -%}
<div class="panel-body">
<p id="gradebook-error">{{ message }}</p>
<p>Correct it, then reload this page: formgrader connects again at each page.</p>
</div>
{%- endblock -%}
