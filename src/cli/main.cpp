// The shardpack command line: option parsing, logging and exit codes. The work is done by the
// library in src/; this file only wires it up.
//
// Exit codes: 0 success, 1 data or I/O failure, 2 bad usage, 130/143 interrupted (SIGINT/SIGTERM).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <map>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <string>

#include "cli/build_command.hpp"
#include "cli/colors_command.hpp"
#include "cli/export_command.hpp"
#include "cli/inspect_command.hpp"
#include "cli/log_sanitizer.hpp"
#include "cli/merge_command.hpp"
#include "cli/push_command.hpp"
#include "cli/verify_command.hpp"
#include "errors.hpp"
#include "pipeline/build_pipeline.hpp"
#include "remote/s3_storage.hpp"

namespace {

using namespace shardpack;

void on_signal(int sig) { build_interrupt_signal.store(sig); }

// Two examples at the end of every --help: the program's and each subcommand's.
void add_help_examples(CLI::App& app) {
    const std::map<std::string, std::string> examples = {
        {"", "  shardpack build --csv list.csv --classes class_dict.csv --out data/train --size 512x512\n"
             "  shardpack colors --csv list.csv --classes class_dict.csv"},
        {"build", "  shardpack build --csv list.csv --classes class_dict.csv --out data/train --size 512x512\n"
                  "  shardpack build --csv photos.csv --out data/photos --size 224x224 --on-error skip"},
        {"colors", "  shardpack colors --csv list.csv --classes class_dict.csv --color-tolerance 2\n"
                   "  shardpack colors --csv list.csv --write-dict class_dict.csv"},
        {"inspect", "  shardpack inspect data/train\n  shardpack inspect data/train --json"},
        {"verify", "  shardpack verify data/train\n  shardpack verify data/train --json"},
        {"push", "  shardpack push data/train s3://my-bucket/datasets/train\n"
                 "  AWS_ENDPOINT_URL=http://127.0.0.1:8333 shardpack push data/train s3://local/train --json"},
        {"export", "  shardpack export data/train --index 0 --out /tmp/sample0\n"
                   "  shardpack export data/train --index 41 --out check/s41"},
    };
    app.footer("Examples:\n" + examples.at(""));
    for (CLI::App* sub : app.get_subcommands({}))
        if (const auto it = examples.find(sub->get_name()); it != examples.end()) sub->footer("Examples:\n" + it->second);
}

}  // namespace

int main(int argc, char** argv) {
    remote::enable_s3_urls();  // inspect, verify and export take s3://BUCKET/PREFIX too
    auto logger = spdlog::stderr_color_mt("shardpack");
    logger->set_formatter(make_sanitizing_formatter("%^%l%$: %v"));  // control characters escaped, long paths cut
    spdlog::set_default_logger(logger);

    CLI::App app{"shardpack: pack image datasets into sharded, indexed, checksummed record files, once"};
    app.set_version_flag("--version", std::string("shardpack ") + SHARDPACK_VERSION);
    app.require_subcommand(1);
    bool quiet = false, verbose = false;
    app.add_flag("-q,--quiet", quiet, "Log errors only");
    app.add_flag("-v,--verbose", verbose, "Log debug detail");

    app.name("shardpack");
    app.fallthrough();  // -q and -v also after the subcommand
    build_command_options build;
    CLI::App* build_cmd = add_build_command(app, build);
    colors_command_options colors;
    CLI::App* colors_cmd = add_colors_command(app, colors);

    merge_command_options merge;
    CLI::App* merge_cmd = add_merge_command(app, merge);

    push_command_options push;
    CLI::App* push_cmd = add_push_command(app, push);

    inspect_command_options inspect;
    CLI::App* inspect_cmd = add_inspect_command(app, inspect);
    verify_command_options verify;
    CLI::App* verify_cmd = add_verify_command(app, verify);
    export_command_options export_options;
    CLI::App* export_cmd = add_export_command(app, export_options);

    add_help_examples(app);
    try {
        std::vector<std::string> args;
        try {
            args = expand_build_config(std::vector<std::string>(argv + 1, argv + argc), build_cmd);
        } catch (const usage_error& e) {
            spdlog::error("{}", e.what());
            return 2;
        }
        std::reverse(args.begin(), args.end());  // CLI11 takes a vector in reverse order
        app.parse(args);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        app.exit(e);  // prints the message
        return 2;
    }
    spdlog::set_level(quiet ? spdlog::level::err : verbose ? spdlog::level::debug : spdlog::level::info);

    try {
        // build and merge stop at the next row on SIGINT/SIGTERM and publish nothing (exit
        // 130/143); the other commands keep the signals' default action.
        if (*build_cmd || *merge_cmd) {
            std::signal(SIGINT, on_signal);
            std::signal(SIGTERM, on_signal);
        }
        if (*build_cmd) return run_build_command(build, ::isatty(STDERR_FILENO) && !quiet);
        if (*colors_cmd) return run_colors_command(colors);
        if (*merge_cmd) return run_merge_command(merge);
        if (*push_cmd) return run_push_command(push);
        if (*inspect_cmd) return run_inspect_command(inspect);
        if (*verify_cmd) return run_verify_command(verify);
        if (*export_cmd) return run_export_command(export_options);
    } catch (const usage_error& e) {
        spdlog::error("{}", e.what());
        return 2;
    } catch (const std::exception& e) {
        spdlog::error("{}", e.what());
        return 1;
    }
    return 0;
}
