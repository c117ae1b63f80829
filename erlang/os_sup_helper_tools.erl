%%% @doc `os_sup_helper_tools' is the table of the helper's tools: the
%%% `tool' request's name -> `{Module, Function}', each an exported
%%% `Function(Args) -> os_sup_lib_reply:reply()'. The only place on the node
%%% that names them; the server's other table is its tool list (one file per
%%% tool under src/mcp/tools/). `os_sup_helper' runs a tool from it, under
%%% its guard.
-module(os_sup_helper_tools).

-export([table/0]).

-spec table() -> #{atom() => {module(), atom()}}.
table() ->
    #{supervision_tree => {os_sup_proc_tree, supervision_tree},
      processes => {os_sup_proc_top, processes},
      process_info => {os_sup_proc_info, process_info},
      get_state => {os_sup_proc_state, get_state},
      applications => {os_sup_node_applications, applications},
      system_info => {os_sup_node_system_info, system_info},
      ets => {os_sup_node_ets, ets},
      ports => {os_sup_node_ports, ports},
      waits => {os_sup_waits, waits},
      diagnose => {os_sup_diagnose, diagnose},
      boot_waits => {os_sup_diagnose_boot, boot_waits},
      vitals => {os_sup_node_vitals, vitals},
      recompile => {os_sup_dev, recompile},
      trace => {os_sup_trace, trace},
      trace_messages => {os_sup_trace, trace_messages},
      trace_results => {os_sup_trace_read, trace_results},
      trace_stop => {os_sup_trace_read, trace_stop},
      traces => {os_sup_trace_read, traces},
      system_monitor => {os_sup_trace_sysmon, system_monitor},
      docs => {os_sup_code, docs},
      source => {os_sup_code, source},
      callers => {os_sup_code_xref, callers},
      find => {os_sup_code_find, find},
      cluster_view => {os_sup_cluster, view},
      partition => {os_sup_cluster, partition},
      heal => {os_sup_cluster, heal}}.
