"""The environment variable that holds the dashboard's bearer token (read by the app and by
`reactorflow dashboard`; here, apart from the app, so neither needs the web extra to name it)."""

TOKEN_ENV = "REACTORFLOW_DASHBOARD_TOKEN"
