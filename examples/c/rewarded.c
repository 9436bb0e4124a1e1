/* Shows a rewarded ad and prints the reward. Build: make (pkg-config adorch-client), run:
 * ./rewarded [SLOT] [USER_ID]; the socket is found as adorchctl finds it ($ADORCH_SOCKET...). */
#include <adorch/client.h>

#include <stdio.h>

static int fail(const char *what, adorch_error *error) {
    fprintf(stderr, "%s: %s: %s\n", what, error->name, error->message);
    adorch_error_clear(error);
    return 1;
}

int main(int argc, char **argv) {
    const char *slot = argc > 1 ? argv[1] : "rewarded_main";
    const char *user = argc > 2 ? argv[2] : "example-user";
    adorch_error error = ADORCH_ERROR_INIT;
    adorch_client *client = NULL;
    if (adorch_client_new(&client, NULL, &error)) return fail("connect", &error);

    adorch_rewarded_ad *ad = NULL;
    adorch_shown_ad *shown = NULL;
    adorch_reward *reward = NULL;
    if (adorch_rewarded_ad_new(client, slot, &ad, &error)) return fail("rewarded ad", &error);
    if (adorch_rewarded_ad_load(ad, 30000, &error)) return fail("load", &error);
    if (adorch_rewarded_ad_show(ad, user, NULL, &shown, &error)) return fail("show", &error);
    printf("showing ad %s from %s\n", adorch_shown_ad_get_ad(shown)->id, adorch_shown_ad_get_ad(shown)->network);

    /* The app displays the payload here; then it tells the daemon what the viewer did. */
    if (adorch_shown_ad_report_impression(shown, &error) || adorch_shown_ad_report_complete(shown, &error) ||
        adorch_shown_ad_report_close(shown, &error))
        return fail("report", &error);
    if (adorch_shown_ad_wait_reward(shown, 10000, &reward, &error)) return fail("reward", &error);
    printf("reward: %lld %s for %s (transaction %s)\n", (long long)reward->reward_amount, reward->reward_name, reward->user_id,
           reward->trans_id);
    /* Credit the user first, then acknowledge: an unacknowledged reward is delivered again. */
    if (adorch_client_ack_reward(client, reward->trans_id, &error)) return fail("ack", &error);

    adorch_reward_free(reward);
    adorch_shown_ad_free(shown);
    adorch_rewarded_ad_free(ad);
    adorch_client_free(client);
    return 0;
}
